"""PySpark Python Data Source "flight-paimon": Paimon and push tables over Arrow Flight.

    from spark_reader import register
    register(spark)  # or spark.dataSource.register(FlightPaimonDataSource)
    spark.read.format("flight-paimon").option("uri", "grpc://127.0.0.1:8815").option("table", "db.t").load()

Set `spark.sql.python.filterPushdown.enabled=true` on the session: the reader overrides
`pushFilters` (filters go to the server as `[column, op, value]`), and PySpark 4.3 refuses
every read of a source that does so while the setting is off. See spark_reader/README.md.
"""

from spark_reader.source import FlightPaimonDataSource, register

__all__ = ["FlightPaimonDataSource", "register"]

"""PySpark Python Data Source "flight-paimon": Paimon and push tables over Arrow Flight.

    from spark_reader import register
    register(spark)  # or spark.dataSource.register(FlightPaimonDataSource)
    spark.read.format("flight-paimon").option("uri", "grpc://127.0.0.1:8815").option("table", "db.t").load()

Each action on a DataFrame reads the table as it is then (see spark_reader/README.md).
"""

from spark_reader.data_source import FlightPaimonDataSource, register

__all__ = ["FlightPaimonDataSource", "register"]

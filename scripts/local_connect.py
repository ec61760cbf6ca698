"""A Spark Connect server on a classic session's own SparkContext (loopback, a free port), and a
Connect client session to it, for the tests, the benchmark and the demo.

It is Spark's own Connect service (`SparkConnectService`, from pyspark's connect jar): clients
talk gRPC to it exactly as to `start-connect-server.sh`, and their queries run in the classic
session's JVM, so the two can be compared on the same resources.
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def connect_session(spark):
    """Yield a `pyspark.sql.connect` session served by `spark`'s SparkContext; stop both after."""
    context = spark.sparkContext._jsc.sc()
    context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
    context.conf().set("spark.connect.grpc.binding.port", "0")  # a free port
    service = getattr(getattr(spark._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$"), "MODULE$")
    service.start(context)
    # The Connect session class itself: pyspark.sql.SparkSession.builder.remote() would switch
    # this whole process (and the classic session beside it) to Connect mode.
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(f"sc://127.0.0.1:{service.localPort()}").create()
    try:
        yield session
    finally:
        session.stop()
        service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())

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


@contextmanager
def connect_server(*spark_args: str, timeout: float = 120):
    """Yield the `sc://127.0.0.1:PORT` of a Spark Connect server started as users deploy it:
    scripts/connect-server (pyspark's sbin/start-connect-server.sh, workers on this .venv) on a
    free loopback port, with no UI; its whole process group is stopped after."""
    import os
    import queue
    import re
    import signal
    import subprocess
    import threading
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    argv = [str(root / "scripts" / "connect-server"), "--master", "local[2]",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.connect.grpc.binding.port=0", "--conf", "spark.ui.enabled=false", *spark_args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: queue.Queue = queue.Queue()
    tail: list[str] = []

    def pump():  # the server logs to stdout all its life: keep reading so it never blocks
        for line in proc.stdout:
            tail[:] = (tail + [line])[-40:]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, name="connect-server-log", daemon=True).start()
    try:
        address = None
        while address is None:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                line = None
            if line is None:
                raise RuntimeError("scripts/connect-server did not start:\n" + "".join(tail))
            match = re.search(r"Spark Connect server started at: ([\d.]+:\d+)", line)
            address = match and match.group(1)
        yield f"sc://{address}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

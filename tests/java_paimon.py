"""Java Paimon (0.9) run by the tests: tests/java/PaimonJava.java on Java's source launcher with
the Paimon 0.9 jar scripts/setup.d/20-java-paimon fetches and pyspark's jars (Hadoop included).

`java_paimon` (a fixture) skips the test, naming what is missing, when Java or the jar is not
there. The jar is `$FLIGHT_PAIMON_JAVA_PAIMON_JAR`, else ~/.cache/flight-paimon/ (or
`$FLIGHT_PAIMON_CACHE`)/paimon-python-java-bridge-0.9.0.jar."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "java" / "PaimonJava.java"
JAR = "paimon-python-java-bridge-0.9.0.jar"
PAIMON_VERSION = "0.9.0"
# A JVM run of the harness (start and compile ~3 s here); generous for a machine 10x slower.
TIMEOUT = 180
JVM_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def jar_path() -> Path:
    if os.environ.get("FLIGHT_PAIMON_JAVA_PAIMON_JAR"):
        return Path(os.environ["FLIGHT_PAIMON_JAVA_PAIMON_JAR"])
    cache = os.environ.get("FLIGHT_PAIMON_CACHE") or Path.home() / ".cache" / "flight-paimon"
    return Path(cache) / JAR


def missing() -> str | None:
    """Why Java Paimon cannot run here, or None."""
    if shutil.which("java") is None:
        return "java is not on PATH (Java 17 runs the Java Paimon interop tests)"
    if not jar_path().is_file():
        return f"{jar_path()} is missing (scripts/setup fetches it from pypaimon 0.2.0's sdist)"
    try:
        import pyspark
    except ImportError:
        return "pyspark is not installed (its jars hold Hadoop for Java Paimon)"
    if not (Path(pyspark.__file__).parent / "jars").is_dir():
        return "pyspark's jars directory is missing"
    return None


class JavaPaimon:
    """The harness's commands over one warehouse directory."""

    def __init__(self, warehouse: str):
        import pyspark

        self.warehouse = warehouse
        self.classpath = f"{jar_path()}{os.pathsep}{Path(pyspark.__file__).parent / 'jars'}/*"

    def command(self, *args) -> list[str]:
        return ["java", *JVM_OPTIONS, "-cp", self.classpath, str(SOURCE), args[0], self.warehouse, *map(str, args[1:])]

    def run(self, *args, stdin: str = "") -> str:
        """A command's stdout; its one-line error (AssertionError) when it fails."""
        done = subprocess.run(self.command(*args), input=stdin, capture_output=True, text=True, timeout=TIMEOUT)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
            raise AssertionError(f"Java Paimon {args[0]} {args[1]} failed: {(errors or [done.stderr[-2000:]])[-1]}")
        return done.stdout

    def create(self, table: str, fields: list, primary_keys=(), partition_keys=(), options=None) -> None:
        spec = {"fields": fields, "primaryKeys": list(primary_keys), "partitionKeys": list(partition_keys),
                "options": {k: str(v) for k, v in (options or {}).items()}}
        self.run("create", table, json.dumps(spec))

    def read(self, table: str, snapshot: int | None = None) -> list[dict]:
        out = self.run("read", table, *([snapshot] if snapshot is not None else []))
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def latest(self, table: str) -> int:
        return int(self.run("latest", table).strip())

    def write(self, table: str, rows: list[dict]) -> int:
        """One commit of `rows` (each may carry "_kind": +I -U +U -D); the snapshot it made."""
        return int(self.run("write", table, stdin="".join(json.dumps(r) + "\n" for r in rows)).split()[-1])

    def expire(self, table: str, retain: int) -> int:
        return int(self.run("expire", table, retain).strip())

    def commits(self, table: str, n: int, rows: int, writer: str, start: int = 0,
                interval_ms: int = 100) -> subprocess.Popen:
        """Java committing `n` times, every `interval_ms`, in the background: a Popen whose
        stdout gives each commit's snapshot id as it is made."""
        return subprocess.Popen(self.command("commits", table, n, rows, writer, start, interval_ms),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def java_paimon(warehouse) -> JavaPaimon:
    reason = missing()
    if reason:
        pytest.skip(reason)
    return JavaPaimon(warehouse)

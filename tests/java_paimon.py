"""Java Paimon (0.9) run by the tests: tests/java/PaimonJava.java on Java's source launcher with
the Paimon 0.9 jar scripts/setup.d/20-java-paimon fetches and pyspark's jars (Hadoop included).

One JVM serves a test module's commands (`PaimonJava serve`: a JVM's start and the file's
compilation cost ~3 s, a command on a warm JVM milliseconds). `java_paimon` (a fixture) gives a
test the commands over its warehouse, and skips the test, naming what is missing, when Java or
the jar is not there. The jar is `$FLIGHT_PAIMON_JAVA_PAIMON_JAR`, else ~/.cache/flight-paimon/
(or `$FLIGHT_PAIMON_CACHE`)/paimon-python-java-bridge-0.9.0.jar."""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "java" / "PaimonJava.java"
JAR = "paimon-python-java-bridge-0.9.0.jar"
PAIMON_VERSION = "0.9.0"
# A command's answer (the JVM's start and compilation included for the first, ~3 s here);
# generous for a machine 10x slower.
TIMEOUT = 180
JVM_OPTIONS = ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


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


def classpath() -> str:
    import pyspark

    return f"{jar_path()}{os.pathsep}{Path(pyspark.__file__).parent / 'jars'}/*"


class JavaVM:
    """One `PaimonJava serve` JVM: requests answered in order, each within TIMEOUT (else the JVM
    is killed and the request fails). Its stderr's last lines are kept for failures."""

    def __init__(self):
        self.proc = subprocess.Popen(["java", *JVM_OPTIONS, "-cp", classpath(), str(SOURCE), "serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.answers: queue.Queue = queue.Queue()
        self.stderr: collections.deque = collections.deque(maxlen=40)
        self.lock = threading.Lock()
        self.jobs = itertools.count(1)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.answers.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line)
        put(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, args: list, stdin: str = "", background: str | None = None, timeout: float = TIMEOUT) -> str:
        """The command's output; its error raised as an AssertionError naming the command."""
        with self.lock:
            message = {"args": [str(a) for a in args], "stdin": stdin}
            if background is not None:
                message["background"] = background
            try:
                self.proc.stdin.write(json.dumps(message) + "\n")
                self.proc.stdin.flush()
                line = self.answers.get(timeout=timeout)
            except queue.Empty:
                self.close()
                raise AssertionError(f"Java Paimon {args[0]} gave no answer in {timeout} s (the JVM was stopped); "
                                     f"its stderr: {''.join(self.stderr)[-2000:]}") from None
            except BrokenPipeError:
                line = None
            if line is None:
                raise AssertionError(f"the Java Paimon JVM ended (exit {self.proc.wait(10)}): "
                                     f"{''.join(self.stderr)[-2000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"Java Paimon {' '.join(map(str, args[:1] + args[2:3]))} failed: {answer['error']}")
        return answer["out"]

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class JavaPaimon:
    """The harness's commands over one warehouse directory, on a shared JVM."""

    def __init__(self, vm: JavaVM, warehouse: str):
        self.vm, self.warehouse = vm, warehouse

    def run(self, *args, stdin: str = "") -> str:
        return self.vm.request([args[0], self.warehouse, *args[1:]], stdin)

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
        """One commit of `rows` (each may carry "_kind": +I -U +U -D) by Java's batch writer; the
        snapshot it made."""
        return int(self.run("write", table, stdin="".join(json.dumps(r) + "\n" for r in rows)).split()[-1])

    def expire(self, table: str, retain: int) -> int:
        return int(self.run("expire", table, retain).strip())

    def commits(self, table: str, n: int, rows: int, writer: str, start: int = 0, interval_ms: int = 100,
                mode: str = "write-only") -> Commits:
        """Java committing `n` times, every `interval_ms`, on a thread of the JVM; `mode`
        write-only (the server compacts) or compact (Java's writer compacts too)."""
        job = f"commits-{next(self.vm.jobs)}"
        self.vm.request(["commits", self.warehouse, table, n, rows, writer, start, interval_ms, mode],
                        background=job)
        return Commits(self.vm, job, table)


class Commits:
    """Java's commits running on the JVM."""

    def __init__(self, vm: JavaVM, job: str, table: str):
        self.vm, self.job, self.table = vm, job, table

    def join(self, timeout: float = TIMEOUT) -> list[dict]:
        """Each commit's {"snapshot": latest after it, "compacted": [files its compaction replaced]};
        an AssertionError naming the table when they failed."""
        try:
            out = self.vm.request(["join", self.job], timeout=timeout)
        except AssertionError as e:
            raise AssertionError(f"Java's commits into {self.table}: {e}") from None
        return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def java_vm():
    """One JVM for a test module's Java commands (started when a test first needs it)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    vms: list[JavaVM] = []

    def current() -> JavaVM:
        if not vms or not vms[-1].alive():  # a test that timed out stopped it
            vms.append(JavaVM())
        return vms[-1]

    yield current
    for vm in vms:
        vm.close()


@pytest.fixture
def java_paimon(java_vm, warehouse) -> JavaPaimon:
    return JavaPaimon(java_vm(), warehouse)

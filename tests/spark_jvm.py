"""The JVM options of the tests' Spark drivers, and the class-data archive that makes them start cheaply.

Every Spark driver of the suite (the session fixture, the drivers the chaos scenarios and the
tests start as child processes, the Spark Connect server) is a short-lived JVM whose start-up is
CPU: on 2 cores a driver spent ~29 s of JVM CPU on a streaming query over 16 snapshots, ~17 s with
the C1 compiler only (`-XX:TieredStopAtLevel=1`), ~11 s with that and an archive of Spark's
classes (JDK 17's dynamic AppCDS). The options reach every driver through `SPARK_SUBMIT_OPTS`
(spark-submit adds it to the driver JVM's command line), which conftest.py sets for the run and
child processes inherit.

The archive is built once per machine by `python -m tests.spark_jvm` (scripts/test runs it first):
a driver runs a streaming read of a Paimon table through a real server into Parquet, and its JVM
writes the classes it loaded at exit. A driver whose classpath or JVM differs from the archive's
runs without it (`-Xshare:auto`); the JVM's warning then goes to stderr, never to the driver's stdout,
which tests read. The archive's name holds the Java and pyspark versions and a stamp of pyspark's jars.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.process import ROOT, ServerProcess, child_env

C1_ONLY = "-XX:TieredStopAtLevel=1"
# JVM log lines (a CDS mismatch says so) go to stderr: a driver's stdout is read by its tests.
LOG_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stderr.splitlines()[0] if out.stderr else ""
    return first.split('"')[1] if first.count('"') >= 2 else None


def archive_path() -> Path | None:
    """Where this machine's archive for this Java and pyspark is (or would be); None without them."""
    java = _java_version()
    if java is None:
        return None
    spec = importlib.util.find_spec("pyspark")  # found, not imported: importing pyspark is ~1 s of CPU
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(spec.submodule_search_locations[0]) / "jars"
    # A JVM refuses an archive whose jars changed (size, time): a reinstalled pyspark gets a new one.
    stamp = hashlib.sha1(repr(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(jars)
                                     if e.name.endswith(".jar"))).encode()).hexdigest()[:12] if jars.is_dir() else "none"
    cache = os.environ.get("FLIGHT_PAIMON_CACHE") or Path.home() / ".cache" / "flight-paimon"
    return Path(cache) / f"spark-classes-java{java}-pyspark{importlib.metadata.version('pyspark')}-{stamp}.jsa"


def submit_opts() -> str:
    """SPARK_SUBMIT_OPTS for the tests' drivers: C1 only, logs to stderr, the archive if built."""
    archive = archive_path()
    opts = [C1_ONLY, LOG_TO_STDERR]
    if archive is not None and archive.is_file():
        opts.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(opts)


def _session_ended(sid: int, timeout: float) -> bool:
    """Wait until no process of session `sid` is left (the driver's JVM exits after its Python
    and writes the archive as it exits)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for proc in psutil.process_iter():
            try:
                if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc.pid)
            except (psutil.Error, OSError):
                continue  # gone while we looked
        if not alive:
            return True
        time.sleep(0.2)
    return False


def build(archive: Path) -> None:
    """Run one streaming Spark query through a real server with the archive written at its JVM's exit."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    with tempfile.TemporaryDirectory() as work, ServerProcess(f"{work}/warehouse", stderr=subprocess.DEVNULL) as srv:
        env, log = child_env(), Path(work) / "driver.log"
        subprocess.run([sys.executable, "-m", "flight_cli", "create", "db.t", "--uri", srv.uri, "--schema",
                        "producer:string,seq:int64,id:int64"], env=env, cwd=ROOT, check=True, timeout=120,
                       stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "chaos.producer", srv.uri, "paimon:db.t", "--producer", "w",
                        "--batches", "4", "--rows", "10"], env=env, cwd=ROOT, check=True, timeout=120,
                       stdout=subprocess.DEVNULL)
        env["SPARK_SUBMIT_OPTS"] = f"{C1_ONLY} {LOG_TO_STDERR} -XX:ArchiveClassesAtExit={partial}"
        driver = subprocess.Popen([sys.executable, "-m", "chaos.spark_job", srv.uri, "--read", "paimon:db.t",
                                   "--out", f"{work}/out", "--checkpoint", f"{work}/ckpt", "--available-now"],
                                  env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"),
                                  start_new_session=True)
        code = driver.wait(600)
        if code != 0 or not _session_ended(driver.pid, 120) or not partial.is_file():
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"the Spark driver did not write its class archive (exit code {code}): "
                               f"{log.read_text()[-2000:]}")
    partial.replace(archive)


def main() -> int:
    archive = archive_path()
    if archive is None:
        print("java not found: no Spark class archive", file=sys.stderr)
        return 0
    if not archive.is_file():
        build(archive)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())

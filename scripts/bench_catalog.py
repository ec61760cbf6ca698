"""What a table's latest-snapshot read and a commit cost by catalog: the file-system catalog, the
JDBC catalog on SQLite and (with --postgresql URI) on PostgreSQL, each opened by the server's
compat.create_catalog and by plain pypaimon (whose JDBC tables open a new catalog, a new database
connection, at every latest-snapshot read).

Prints, per catalog and opener, the median milliseconds of `get_latest_snapshot` (--reads calls)
and of a 10-row commit (--commits). Rounds alternate the openers, --rounds times.

Usage: .venv/bin/python scripts/bench_catalog.py [--postgresql jdbc:postgresql://127.0.0.1:5432/paimon
       --user paimon] [--reads 100] [--commits 20] [--rounds 3]
(a PostgreSQL of its own: initdb -D DIR -U paimon --auth=trust; pg_ctl -D DIR -o "-p PORT" start;
createdb -h 127.0.0.1 -p PORT -U paimon paimon; as a user other than root.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pypaimon import CatalogFactory  # noqa: E402 - after the checkout is on the path

from flight_server.paimon import compat  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def commit(table, start: int) -> None:
    builder = table.new_batch_write_builder()
    write, done = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.table({"id": list(range(start, start + 10)), "name": ["x"] * 10}, schema=SCHEMA))
        done.commit(write.prepare_commit())
    finally:
        write.close()
        done.close()


def measure(catalog, name: str, reads: int, commits: int) -> tuple[float, float]:
    table = catalog.get_table(name)
    manager = table.snapshot_manager()
    read_ms = []
    for _ in range(reads):
        start = time.perf_counter()
        manager.get_latest_snapshot()
        read_ms.append((time.perf_counter() - start) * 1000)
    commit_ms = []
    for i in range(commits):
        start = time.perf_counter()
        commit(table, i * 10)
        commit_ms.append((time.perf_counter() - start) * 1000)
    return statistics.median(read_ms), statistics.median(commit_ms)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--postgresql", help="a JDBC URL of a PostgreSQL database to measure as well")
    p.add_argument("--user", default="paimon", help="its user (jdbc.user)")
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--commits", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="bench-catalog-")
    catalogs = {"filesystem": {}, "jdbc sqlite": {"metastore": "jdbc", "uri": f"jdbc:sqlite:{root}/catalog.db"}}
    if args.postgresql:
        catalogs["jdbc postgresql"] = {"metastore": "jdbc", "uri": args.postgresql, "jdbc.user": args.user}
    openers = {"compat": compat.create_catalog,
               "pypaimon": lambda warehouse, options: CatalogFactory.create({**options, "warehouse": warehouse})}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for kind, options in catalogs.items():
        warehouse = f"{root}/{kind.replace(' ', '-')}"
        name = f"bench.t{uuid.uuid4().hex[:8]}"
        compat.create_table(compat.create_catalog(warehouse, options), name, SCHEMA, [], [], {"bucket": "-1"})
        for _ in range(args.rounds):
            for opener, make in openers.items():
                results.setdefault((kind, opener), []).append(measure(make(warehouse, options), name, args.reads,
                                                                      args.commits))
    print(f"{'catalog':<18}{'opened by':<10}{'latest snapshot ms':>20}{'commit ms':>12}")
    for (kind, opener), runs in results.items():
        print(f"{kind:<18}{opener:<10}{statistics.median(r[0] for r in runs):>20.2f}"
              f"{statistics.median(r[1] for r in runs):>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

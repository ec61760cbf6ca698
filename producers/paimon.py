"""Producing into a Paimon table with pypaimon: one Arrow table as one commit (one snapshot)."""

from __future__ import annotations

import pyarrow as pa


def commit_arrow(table, data: pa.Table) -> int:
    """Write `data` to the pypaimon `table` in one commit; return the snapshot id it made."""
    builder = table.new_batch_write_builder()
    writer, committer = builder.new_write(), builder.new_commit()
    try:
        writer.write_arrow(data)
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()
    return table.snapshot_manager().get_latest_snapshot().id

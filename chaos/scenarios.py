"""Every scenario module, imported for its registrations."""

from __future__ import annotations


def load() -> None:
    from chaos import abuse, ingest_faults, maintenance_faults, push_faults, server_faults, spark_faults  # noqa: F401



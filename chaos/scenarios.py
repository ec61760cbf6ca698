"""Every scenario module, imported for its registrations."""

from __future__ import annotations


def load() -> None:
    from chaos import (  # noqa: F401
        abuse,
        ingest_faults,
        maintenance_faults,
        push_faults,
        server_faults,
        shared_faults,
        spark_faults,
    )



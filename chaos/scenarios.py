"""Every scenario module, imported for its registrations."""

from __future__ import annotations


def load() -> None:
    from chaos import push_faults  # noqa: F401



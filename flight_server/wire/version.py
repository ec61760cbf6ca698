"""The one version of flight-paimon: pyproject's, as the installed distribution says it (stdlib only,
so `flight_cli --version` stays light); a checkout run without installing says so."""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "flight-paimon"
NOT_INSTALLED = "0+unknown"  # a PEP 440 local version: sorts below every release


def version() -> str:
    """The installed flight-paimon's version, or `0+unknown` when it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return NOT_INSTALLED


VERSION = version()

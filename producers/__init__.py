"""Client side of flight-paimon: the TableSink producers push through, and a small client."""

from producers.client import Client
from producers.sink import SinkError, TableSink

__all__ = ["Client", "SinkError", "TableSink"]

"""The flight-paimon protocol, importable with pyarrow alone: what clients and the server say.

Clients (`producers`, `spark_reader`, `flight_cli`'s client commands) import only this package
from `flight_server`; docs/protocol.md is its reference for users.
"""

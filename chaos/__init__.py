"""Fault, abuse and soak runs against real servers, producers, consumers and Spark drivers.

`scripts/chaos.py` runs every scenario N times with the fault at a random moment and writes
docs/reliability.md; `tests/test_chaos.py` runs a short version of each.
"""

"""Paimon tables of one warehouse: planned per bucket, read, followed (pypaimon underneath)."""

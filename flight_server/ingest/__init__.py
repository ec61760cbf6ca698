"""Durable writes: producer streams into Paimon tables, group-committed, acked once committed."""

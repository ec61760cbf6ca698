"""Table maintenance: the Paimon tables the server writes stay as fast to read as freshly compacted
ones (compaction, snapshot expiry, consumer-aware retention), as Java Paimon's writer keeps them."""

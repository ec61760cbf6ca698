"""Push tables: bounded per-partition logs that producers push into and readers drain or replay."""

"""PySpark Python Data Source "flight-paimon" (issue 4; not built yet)."""

"""flight-paimon server: push tables and Paimon tables over Arrow Flight."""

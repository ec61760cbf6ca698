"""A push-table producer over plain grpcio stubs generated from producers/proto/flight.proto (no pyarrow.flight)."""

"""Benchmarks that print figures. The side-by-side ones (`raw_grpc`, `nats_peer`) are modules
run through `python -m bench <name>`; each also returns its rows as `bench.common.Result`."""

"""I/O adapters shared by the programs: clock, ZooKeeper store, settings, structured logs."""

"""minibroker: Kafka's ZooKeeper-era replication, re-implemented to watch and to test against.

This package is the shared library: `core` (pure types and codecs), `runtime` (I/O adapters),
`rpc` (generated code), `cli` and `localcluster`. It imports none of the programs
(`broker`, `controller`, `loadgen`); the local cluster starts them as subprocesses.
"""

__version__ = "0.1.0"

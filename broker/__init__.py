"""The broker program: serves clients and followers over gRPC, registers in ZooKeeper.

Replication rules (broker/replication/) and the log (broker/log/) arrive with the next issues.
"""

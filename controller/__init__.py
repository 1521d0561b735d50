"""The controller program: elected through ZooKeeper, one active at a time, standbys waiting.

Leader elections, topics and UpdateMetadata arrive with the controller issue; this package
already holds the election and fencing of reference §5.1.
"""

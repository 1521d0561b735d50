"""Transactions under delay (issue 41 §2): Kafka 2.6's transaction protocol with a delayed
message, reproduced on a real cluster and judged by the history checker. wire.py: Kafka
requests one at a time; producer.py: a transactional producer of our own that can hold a
produce; scenarios.py: the named scenarios and their reports."""

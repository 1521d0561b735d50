"""Pure replication rules of a broker: partition state, leader epochs, truncation, ISR changes.

No I/O here (enforced by tests/unit/test_import_rules.py): every function takes `now_ms` and
returns decisions that the broker's shells carry out.
"""

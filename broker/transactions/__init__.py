"""Transactions (issue 29): the transaction coordinator's rules (pure) and, as they come, its
state on `__transaction_state`, the markers it writes, and the partitions' transaction state."""

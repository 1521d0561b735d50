"""The coordinators' own records on the replicated log (Kafka's `__consumer_offsets`, later
`__transaction_state`): their byte formats and which partition a key lives on. Pure."""

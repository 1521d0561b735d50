"""The log cleaner (Kafka 2.6's kafka/log/LogCleaner.scala, LogCleanerManager.scala):
`policy` decides which log and which offsets (pure), `offset_map` holds each key's last offset
within a bounded size, `clean` rewrites the segments in a worker thread."""

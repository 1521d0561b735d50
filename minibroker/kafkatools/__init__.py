"""Kafka's command-line tools by their names (kafka-topics, kafka-configs,
kafka-consumer-groups, kafka-reassign-partitions, kafka-acls, kafka-delete-records,
kafka-console-producer, kafka-console-consumer): Kafka 2.6's flags for the common cases and
its output where scripts parse it (docs/kafka-tools-2.6.md), over minibroker. A flag they do
not support is refused with one line naming it. Installed as console scripts, and as
bin/*.sh for a PATH or a KAFKA_HOME-style variable (bin/README.md).
"""

# tool name -> the module whose main(argv) runs it
TOOLS = {
    "kafka-topics": "topics",
    "kafka-configs": "configs",
    "kafka-consumer-groups": "groups",
    "kafka-reassign-partitions": "reassign",
    "kafka-acls": "acls",
    "kafka-delete-records": "delete_records",
    "kafka-console-producer": "console_producer",
    "kafka-console-consumer": "console_consumer",
}

"""The broker's Kafka listener: Kafka's wire protocol beside gRPC, so unmodified Kafka clients
(librdkafka, kafka-python, aiokafka) produce and consume on the test bed. The protocol's
structures come from kafka-python's message classes; this package frames, dispatches and
answers from the replica manager."""

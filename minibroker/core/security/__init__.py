"""Kafka 2.6's security rules without I/O: SASL (PLAIN, SCRAM), principals and the ACL
authorizer's decision. The broker's `broker/security/` package moves the bytes."""

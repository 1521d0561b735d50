"""The broker's security shells: who a connection is (SASL on the Kafka listener, TLS
principals), the SCRAM credentials and ACLs it follows in ZooKeeper, and the authorizer every
request handler asks."""

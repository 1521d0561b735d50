"""Security's I/O side shared by every program and tool: certificates (`certs`), TLS contexts
(`tls`) and Kafka client property files (`client_config`). The rules are in
`minibroker.core.security`."""

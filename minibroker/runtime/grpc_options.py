"""gRPC options every node and client shares: how a dead connection is noticed and how soon a
lost peer is tried again.

A connection can die without a reset: a container cut from its network and reconnected comes
back with a new address, a paused process answers nothing, a dropped packet is just gone.
Kafka notices such a connection when a request on it times out (`NetworkClient` then closes
it, `replica.socket.timeout.ms` = 30 s for a follower). gRPC would keep sending on it until
each call's deadline, forever, so a follower reconnected after a cut would never fetch again.
HTTP/2 keepalive pings close a connection that stops answering within
KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS, calls in flight or not; the channel then reconnects
with Kafka's client backoff (`reconnect.backoff.ms` 50 ms growing to
`reconnect.backoff.max.ms` 1 s) instead of gRPC's own, which grows to 120 s.
"""

from __future__ import annotations

KEEPALIVE_TIME_MS = 2000
KEEPALIVE_TIMEOUT_MS = 2000
RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000

Options = list[tuple[str, int]]


def channel_options(
    *,
    max_receive_bytes: int = -1,
    max_send_bytes: int = -1,
    reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS,
    reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
) -> Options:
    """Options for a channel to a broker or controller (-1: no message size limit)."""
    return [
        ("grpc.max_receive_message_length", max_receive_bytes),
        ("grpc.max_send_message_length", max_send_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # grpcio 1.85 ends an unanswered ping by this one, not by keepalive_timeout_ms
        # (grpc/grpc#39239); its default is a minute.
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # a long-poll fetch sends no data for a while
        ("grpc.http2.min_time_between_pings_ms", KEEPALIVE_TIME_MS),
        ("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.max_reconnect_backoff_ms", reconnect_backoff_max_ms),
    ]


def server_options(*, max_message_bytes: int = -1) -> Options:
    """Options for a broker's or controller's server: it accepts the clients' pings (gRPC's
    default would answer a ping more often than every 5 minutes with GOAWAY)."""
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
        ("grpc.http2.max_ping_strikes", 0),
    ]

"""SaslHandshake and SaslAuthenticate after authentication, or on a listener without SASL:
Kafka's KafkaApis answers ILLEGAL_SASL_STATE (the SASL gate answers them before)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode


async def handle_sasl_handshake(ctx: KafkaContext, request: Any, version: int) -> Any:
    return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])


async def handle_sasl_authenticate(ctx: KafkaContext, request: Any, version: int) -> Any:
    return SaslAuthenticateResponse(
        error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )

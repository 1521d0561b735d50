"""gRPC channels to the cluster's other brokers by address, made on first use and kept: what
the transaction coordinator's marker sends and a leader's verification questions share."""

from __future__ import annotations

import grpc

from minibroker.runtime import grpc_security


class PeerChannels:
    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc_security.aio_channel(address)
        return channel

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await channel.close()

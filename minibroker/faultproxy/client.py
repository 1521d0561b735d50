"""FaultProxyClient: the fault proxy's control service from Python (blocking calls, each a few
milliseconds). Every change it asks for is applied by the proxy at once to all links it names."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import grpc

from minibroker.faultproxy.model import SERVICE, Direction, FaultRequest, LinkView


class FaultProxyError(RuntimeError):
    """The proxy refused a request or could not be reached; the message says which and why."""


class FaultProxyClient:
    """Talks to the proxy whose control port is `address` ("127.0.0.1:PORT").

    `peers` everywhere: node names (`broker-2`) or groups (`brokers`, `controllers`,
    `zookeeper`, `clients`, `all`); empty means all. `direction` is seen from `node`: "out"
    is what it sends, "in" what it receives, "both" both."""

    def __init__(self, address: str, *, timeout_s: float = 5.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._channel = grpc.insecure_channel(address)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> FaultProxyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        rpc = self._channel.unary_unary(f"/{SERVICE}/{method}")
        try:
            raw = rpc(json.dumps(request).encode(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            details = " ".join(str(exc.details()).split())
            raise FaultProxyError(
                f"fault proxy at {self.address}: {method}: {exc.code().name}: {details}"
            ) from None
        answer: dict[str, Any] = json.loads(raw)
        return answer

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Return once the proxy answers; FaultProxyError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.links()
                return
            except FaultProxyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def links(self) -> list[LinkView]:
        """Every link with its faults, open connections and bytes forwarded."""
        return [LinkView.from_json(o) for o in self._call("Links", {})["links"]]

    def fault(self, request: FaultRequest) -> list[str]:
        """Apply any FaultRequest; the names of the links it changed."""
        request.validate()
        return [str(n) for n in self._call("Fault", request.to_json())["links"]]

    def isolate(
        self, node: str, peers: Sequence[str] = (), *, direction: Direction = "both"
    ) -> list[str]:
        """Cut `node`'s links to `peers`: nothing gets through, no connection is closed."""
        return self.fault(FaultRequest(node, tuple(peers), direction=direction, cut=True))

    def delay(
        self,
        node: str,
        delay_ms: int,
        peers: Sequence[str] = (),
        *,
        direction: Direction = "both",
    ) -> list[str]:
        """Hold every chunk on `node`'s links to `peers` `delay_ms` (per direction: a round
        trip with direction "both" takes 2 * delay_ms longer); 0 removes the delay."""
        return self.fault(FaultRequest(node, tuple(peers), direction=direction, delay_ms=delay_ms))

    def throttle(
        self,
        node: str,
        bytes_per_s: int,
        peers: Sequence[str] = (),
        *,
        direction: Direction = "both",
    ) -> list[str]:
        """Cap each direction of each of `node`'s links to `peers` at `bytes_per_s` (shared by
        the link's connections); 0 removes the cap."""
        return self.fault(
            FaultRequest(node, tuple(peers), direction=direction, bandwidth=bytes_per_s)
        )

    def reset(self, node: str, peers: Sequence[str] = (), *, refuse: bool = False) -> list[str]:
        """Close `node`'s connections to `peers` with a TCP reset; with `refuse`, also every
        new one until healed (as a crashed host's closed port would)."""
        return self.fault(FaultRequest(node, tuple(peers), reset=True, refuse=refuse or None))

    def heal(
        self, node: str | None = None, peers: Sequence[str] = (), links: Sequence[str] = ()
    ) -> list[str]:
        """Clear every fault of `node`'s links to `peers` (or of `links`; neither: of every
        link); the names of the links that had one. Held bytes go on in order."""
        request: dict[str, Any] = {}
        if node is not None:
            request["node"] = node
        if peers:
            request["peers"] = list(peers)
        if links:
            request["links"] = list(links)
        return [str(n) for n in self._call("Heal", request)["links"]]

"""/controller, /controller_epoch (reference §1.6, §1.7) and minibroker's own controller
endpoints (not Kafka's)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from minibroker.core.zk_layout.brokers import parse_endpoint
from minibroker.core.zk_layout.json_codec import ZNodeFormatError, dumps, int_field, loads

# ---- /controller and /controller_epoch (reference §1.6, §1.7) ---------------------------------


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(controller_id: int, timestamp_ms: int) -> bytes:
        return dumps({"version": 1, "brokerid": controller_id, "timestamp": str(timestamp_ms)})

    @staticmethod
    def decode(data: bytes | None) -> int:
        """The active controller's id; Kafka's decoder reads only `brokerid`."""
        return int_field(loads(data, "/controller"), "brokerid", "/controller")


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        # A bare ASCII integer, no JSON, no newline.
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes | None) -> int:
        text = (data or b"").decode("ascii", errors="replace")
        if not re.fullmatch(r"-?\d+", text):
            raise ZNodeFormatError(f"/controller_epoch: expected a bare integer, got {data!r}")
        return int(text)


# ---- minibroker's own znodes (not Kafka's) ------------------------------------------------------


class ControllerEndpointZNode:
    """/minibroker/controllers/<id>: where a controller process serves gRPC. Kafka's controller
    is a broker and is found through its broker registration; ours is a separate process, so
    each controller registers its advertised endpoints here (ephemeral), "NAME://host:port" as
    in a broker registration; brokers use them for ControlledShutdown, tools for events."""

    root = "/minibroker/controllers"

    @staticmethod
    def path(controller_id: int) -> str:
        return f"{ControllerEndpointZNode.root}/{controller_id}"

    @staticmethod
    def encode(endpoints: Sequence[str]) -> bytes:
        return dumps({"version": 2, "endpoints": list(endpoints)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[str, ...]:
        """The endpoint strings; version 1 ({"host", "port"}) reads as one PLAINTEXT endpoint."""
        obj = loads(data, "controller endpoint")
        if "endpoints" not in obj:
            host = obj.get("host")
            if not isinstance(host, str):
                raise ZNodeFormatError("controller endpoint: 'host' must be a string")
            return (f"PLAINTEXT://{host}:{int_field(obj, 'port', 'controller endpoint')}",)
        eps = obj["endpoints"]
        if not isinstance(eps, list) or not eps or not all(isinstance(e, str) for e in eps):
            raise ZNodeFormatError("controller endpoint: 'endpoints' must be a list of strings")
        for e in eps:
            parse_endpoint(e)
        return tuple(eps)

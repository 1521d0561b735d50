"""`minibroker health HOST:PORT`: ask a broker's or controller's standard gRPC health service,
for Docker healthchecks and scripts. Exit 0 when SERVING, else 1 with a one-line reason.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from minibroker.runtime import grpc_security
from minibroker.topology import BROKER_HEALTH_SERVICE, CONTROL_HEALTH_SERVICE

SERVICES_HELP = (
    '"" (default): the process is up (a broker: registered in ZooKeeper; a controller: '
    f"connected); {BROKER_HEALTH_SERVICE}: the broker is registered; "
    f"{CONTROL_HEALTH_SERVICE}: this controller is the active one"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "health",
        help="is a broker or controller SERVING? (gRPC health; exit 0 or 1)",
        description="Ask the gRPC health service of a broker or controller. Exit 0 when the "
        "service is SERVING, 1 otherwise, with one line saying why.",
    )
    p.add_argument("address", metavar="HOST:PORT", help="the node's gRPC address")
    p.add_argument("--service", default="", help=SERVICES_HELP)
    p.add_argument(
        "--timeout", type=float, default=3.0, metavar="S", help="seconds to wait (default 3)"
    )
    p.set_defaults(func=cmd_health)


def check(address: str, service: str = "", timeout_s: float = 3.0) -> tuple[bool, str]:
    """(serving, one line describing the answer) of `service` at `address`."""
    what = f"{address} {service or '(process)'}"
    with grpc_security.sync_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(
                health_pb2.HealthCheckRequest(service=service),
                timeout=timeout_s,
                # A node still starting refuses connections: keep trying until the timeout.
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.NOT_FOUND:
                return False, f"{what}: unknown health service {service!r}"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"{what}: no answer within {timeout_s:g} s"
            return False, f"{what}: {code.name}: {' '.join(str(exc.details()).split())}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return response.status == health_pb2.HealthCheckResponse.SERVING, f"{what}: {status}"


def cmd_health(args: argparse.Namespace) -> int:
    serving, line = check(args.address, args.service, args.timeout)
    print(line, file=sys.stdout if serving else sys.stderr)
    return 0 if serving else 1

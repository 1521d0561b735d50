"""The control service through FaultProxyClient: the link table, faults by node and group,
heal, refusals as one-line errors, and net_fault/net_heal events; plus the program itself."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.faultproxy import LinkSpec
from minibroker.faultproxy.client import FaultProxyClient, FaultProxyError
from minibroker.faultproxy.engine import FaultProxy
from minibroker.faultproxy.service import serve
from minibroker.localcluster import free_ports


def specs() -> list[LinkSpec]:
    ports = iter(free_ports(4))
    return [
        LinkSpec("broker-1", "broker-2", next(ports), 1),
        LinkSpec("broker-2", "broker-1", next(ports), 1),
        LinkSpec("broker-1", "zookeeper", next(ports), 1),
        LinkSpec("client", "broker-1", next(ports), 1),
    ]


async def _exercise(caplog: pytest.LogCaptureFixture) -> None:
    proxy = FaultProxy(specs())
    await proxy.start()
    server, port = await serve(proxy, 0)
    client = FaultProxyClient(f"127.0.0.1:{port}")

    def calls() -> None:  # blocking: in a thread, while the loop serves
        client.wait_ready()
        assert [v.name for v in client.links()] == [s.name for s in specs()]
        assert client.isolate("broker-1", ["zookeeper"]) == ["broker-1->zookeeper"]
        assert client.delay("broker-2", 30, ["broker-1"], direction="out") == [
            "broker-1->broker-2",
            "broker-2->broker-1",
        ]
        views = {v.name: v for v in client.links()}
        assert views["broker-1->zookeeper"].describe() == "cut"
        assert views["broker-1->broker-2"].backward.delay_ms == 30
        assert views["broker-2->broker-1"].forward.delay_ms == 30
        assert views["client->broker-1"].describe() == "ok"
        assert client.throttle("broker-1", 5000, ["clients"]) == ["client->broker-1"]
        assert client.heal("broker-1", ["zookeeper"]) == ["broker-1->zookeeper"]
        assert sorted(client.heal()) == [
            "broker-1->broker-2",
            "broker-2->broker-1",
            "client->broker-1",
        ]
        assert not any(v.faulted for v in client.links())
        with pytest.raises(FaultProxyError, match="INVALID_ARGUMENT: bad peer 'zk'"):
            client.isolate("broker-1", ["zk"])
        with pytest.raises(FaultProxyError, match="no link between broker-7 and all"):
            client.heal("broker-7")

    with caplog.at_level(logging.INFO, logger="minibroker.events"):
        try:
            await asyncio.to_thread(calls)
        finally:
            client.close()
            await server.stop(None)
            await proxy.close()
    # Only the proxy's events: other loggers (asyncio's, about grpc's poller) may log too.
    events = [
        (r.getMessage(), getattr(r, "fields", {}))
        for r in caplog.records
        if r.name == "minibroker.events"
    ]
    assert events[0] == (
        "net_fault",
        {"links": ["broker-1->zookeeper"], "node": "broker-1", "peers": ["zookeeper"],
         "direction": "both", "reset": False, "cut": True},
    )  # fmt: skip
    assert ("net_heal", {"links": ["broker-1->zookeeper"], "node": "broker-1",
                         "peers": ["zookeeper"]}) in events  # fmt: skip


def test_the_client_drives_the_control_service(caplog: pytest.LogCaptureFixture) -> None:
    asyncio.run(asyncio.wait_for(_exercise(caplog), 30))


def test_an_unreachable_proxy_is_a_one_line_error() -> None:
    client = FaultProxyClient(f"127.0.0.1:{free_ports(1)[0]}", timeout_s=0.5)
    with client, pytest.raises(FaultProxyError, match="Links: (UNAVAILABLE|DEADLINE_EXCEEDED)"):
        client.links()


def test_the_program_refuses_a_bad_link_table(tmp_path: Path) -> None:
    table = tmp_path / "links.json"
    table.write_text(json.dumps([{"source": "x", "target": "broker-1"}]))
    result = subprocess.run(
        [sys.executable, "-m", "minibroker.faultproxy", "--links", str(table)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"faultproxy: cannot load {table}: bad link")

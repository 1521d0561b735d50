"""The swarm's pure parts: where its engines are (SwarmAccess from the environment), and the
iptables rules a cut on a task becomes (minibroker/swarm/network.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from minibroker.chaos.backend import ChaosError, NetworkFault, Node
from minibroker.chaos.compose_network import Member
from minibroker.cli.main import main
from minibroker.cli.network import take_target_back
from minibroker.swarm.access import SwarmAccess, parse_engines
from minibroker.swarm.network import cut_rules, overlay_subnets


def test_the_engines_are_read_from_the_environment() -> None:
    access = SwarmAccess.from_environment(
        {
            "DOCKER_HOST": "ssh://me@m1",
            "MINIBROKER_SWARM_ENGINES": "node-1=ssh://me@m1, node-2=unix:///s.sock",
        }
    )
    assert access.manager == "ssh://me@m1"
    assert access.engine("node-2") == "unix:///s.sock"
    with pytest.raises(
        ChaosError, match="no Docker engine known for swarm node 'node-3'.*node-1, node-2"
    ):
        access.engine("node-3")
    assert (
        "export MINIBROKER_SWARM_ENGINES=node-1=ssh://me@m1,node-2=unix:///s.sock"
        in access.exports()
    )
    assert SwarmAccess.from_environment({}).manager == "unix:///var/run/docker.sock"


@pytest.mark.parametrize("text", ["node-1", "=ssh://x", "node-1="])
def test_a_malformed_engine_list_is_one_line(text: str) -> None:
    with pytest.raises(ChaosError, match="is not NODE=DOCKER_ADDRESS"):
        parse_engines(text)


def _member(name: str, role: str, ip: str) -> Member:
    networks = {"mb_minibroker": {"IPAddress": ip, "IPPrefixLen": 24}}
    container = SimpleNamespace(attrs={"NetworkSettings": {"Networks": networks}}, status="running")
    node = Node(name, role, int(name[-1]) if name[-1].isdigit() else None)
    return Member(node, container, name, frozenset(networks), {"mb_minibroker": ip}, {})


MEMBERS = [
    _member("zookeeper", "zookeeper", "10.0.1.2"),
    _member("broker-1", "broker", "10.0.1.3"),
    _member("broker-2", "broker", "10.0.1.4"),
    _member("broker-3", "broker", "10.0.1.5"),
]


def _script(fault: NetworkFault) -> tuple[str, list[str]]:
    rules, links = cut_rules(fault, MEMBERS[1], MEMBERS)
    return "\n".join(rules), links


def test_a_cut_from_peers_drops_their_overlay_addresses() -> None:
    script, links = _script(NetworkFault("cut", "broker-1", peers=("zookeeper",)))
    assert links == ["broker-1->zookeeper"]
    assert "-A MINIBROKER-CHAOS -s 10.0.1.2 -j DROP" in script
    assert "-A MINIBROKER-CHAOS -d 10.0.1.2 -j DROP" in script
    assert "-I INPUT 1 -j MINIBROKER-CHAOS" in script and "10.0.1.4" not in script


def test_isolate_drops_everything_to_and_from_the_tasks_own_addresses() -> None:
    script, links = _script(NetworkFault("cut", "broker-1"))
    assert links[-1] == "broker-1->clients" and "broker-1->broker-2" in links
    assert "for ip in $(hostname -I)" in script
    assert "-d $ip ! -s $ip -j DROP" in script and "-s $ip ! -d $ip -j DROP" in script
    assert "RETURN" not in script  # nothing is let through


def test_a_cut_from_clients_lets_the_overlay_through_first() -> None:
    script, links = _script(NetworkFault("cut", "broker-1", peers=("clients",), direction="in"))
    assert links == ["broker-1->clients"]
    lines = script.splitlines()
    overlay = lines.index("iptables -w -A MINIBROKER-CHAOS -s 10.0.1.0/24 -d 10.0.1.0/24 -j RETURN")
    drop = next(i for i, line in enumerate(lines) if "-d $ip ! -s $ip -j DROP" in line)
    assert overlay < drop and "-s $ip ! -d $ip" not in script  # in only
    assert overlay_subnets(MEMBERS[1]) == ["10.0.1.0/24"]


def test_delay_is_refused_on_a_swarm() -> None:
    with pytest.raises(ChaosError, match="only `isolate`"):
        _script(NetworkFault("delay", "broker-1", delay_ms=10))


def test_a_target_given_to_the_flag_is_taken_back() -> None:
    args: Any = argparse.Namespace(target=None, compose=None, swarm="broker-2")
    take_target_back(args)
    assert (args.target, args.swarm) == ("broker-2", "minibroker")
    args = argparse.Namespace(target=None, compose=None, swarm="mystack")
    take_target_back(args)
    assert (args.target, args.swarm) == (None, "mystack")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["cluster", "up", "--swarm", "--compose"], "give --compose or --swarm, not both"),
        (["cluster", "up", "--swarm", "--proxy"], "are not for a swarm"),
        (["cluster", "kill", "broker-2", "--swarm", "--compose"], "not both"),
    ],
)
def test_what_a_swarm_cannot_take_is_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_an_engine_that_does_not_answer_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    assert main(["cluster", "status", "--swarm"]) == 1
    err = capsys.readouterr().err
    assert "no Docker engine answers at unix://" in err and "DOCKER_HOST" in err
    assert err.count("\n") == 1

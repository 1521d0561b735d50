"""`minibroker cluster isolate|delay|throttle|heal|links`: network faults through the chaos
interface: on a process-mode cluster started with `--proxy` (the loopback fault proxy), or with
`--compose` on a compose cluster's containers (`isolate` and `heal`: network disconnects and
iptables rules, minibroker/chaos/compose_network.py), or with `--swarm` on a stack's tasks
(iptables rules, minibroker/swarm/network.py)."""

from __future__ import annotations

import argparse
import json
from typing import Literal

from minibroker import chaos
from minibroker.cli import swarm
from minibroker.cli.locate import add_dir_argument, cluster_dir
from minibroker.faultproxy.model import LinkView
from minibroker.swarm.access import DEFAULT_STACK

TARGETS = "broker-N, controller-N, zookeeper, controller, leader, follower, leader:TOPIC-P"
PEERS_HELP = (
    "comma-separated node names and groups: brokers, controllers, zookeeper, clients, all "
    "(default all)"
)


def add_parsers(csub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    faults = {
        "isolate": "cut a node's links (both ways by default): a partition, connections stall",
        "delay": "add latency to every byte on a node's links, each way",
        "throttle": "cap the bandwidth of each direction of a node's links",
    }
    for command, text in faults.items():
        p = csub.add_parser(command, help=text)
        p.add_argument("target", help=f"{TARGETS} (leader/follower: see --topic)")
        p.add_argument("--from", dest="peers", default="all", metavar="PEERS", help=PEERS_HELP)
        p.add_argument(
            "--direction",
            choices=("both", "out", "in"),
            default="both",
            help="out: only what the node sends; in: only what it receives",
        )
        if command == "delay":
            p.add_argument("--ms", type=int, required=True, help="milliseconds per direction")
        if command == "throttle":
            p.add_argument("--bytes-per-s", type=int, required=True, help="per link direction")
        _common(p)
        p.set_defaults(func=cmd_fault, fault=command)

    heal = csub.add_parser("heal", help="undo the network faults of a node, or of every link")
    heal.add_argument("target", nargs="?", help=f"{TARGETS}; none: every link")
    _common(heal)
    heal.set_defaults(func=cmd_heal)

    links = csub.add_parser("links", help="the fault proxy's links: faults, connections, bytes")
    links.add_argument("--json", action="store_true")
    add_dir_argument(links)
    links.set_defaults(func=cmd_links)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", help="leader/follower mean those of partition 0 of this topic")
    add_dir_argument(p)
    p.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help=f"act on the containers of a compose cluster (project {chaos.DEFAULT_PROJECT})",
    )
    swarm.add_swarm_argument(p, "act on the tasks of a swarm stack (iptables in each task)")
    p.add_argument(
        "--zk",
        help=f"ZooKeeper of a compose or swarm cluster (aliases); $MINIBROKER_ZK or "
        f"{chaos.DEFAULT_ZK}",
    )


def _peers(text: str) -> tuple[str, ...]:
    peers = tuple(p.strip() for p in text.split(",") if p.strip())
    return () if peers in ((), ("all",)) else peers


def take_target_back(args: argparse.Namespace) -> None:
    """`kill --compose broker-2`, `heal --swarm broker-2`: argparse gave the target to the
    flag's optional value; it is the target, and the flag names the default."""
    if args.target is not None:
        return
    for flag, default in (("compose", chaos.DEFAULT_PROJECT), ("swarm", DEFAULT_STACK)):
        value = getattr(args, flag, None)
        if value not in (None, default) and chaos.is_target(value):
            args.target = value
            setattr(args, flag, default)


def backend_of(args: argparse.Namespace) -> chaos.ChaosBackend:
    """The backend `--compose [PROJECT]`, `--swarm [STACK]` or `--dir` names."""
    take_target_back(args)
    project, stack = getattr(args, "compose", None), getattr(args, "swarm", None)
    if project is not None and stack is not None:
        raise chaos.ChaosError("give a compose project (--compose) or a stack (--swarm), not both")
    if stack is not None:
        if args.dir is not None:
            raise chaos.ChaosError("give a cluster dir (--dir) or a stack (--swarm), not both")
        return swarm.swarm_backend(stack, args.zk)
    if project is None:
        return chaos.ProcessBackend(cluster_dir(args))
    return chaos.backend_for(cluster_dir=args.dir, compose_project=project, zk=args.zk)


def _resolve(backend: chaos.ChaosBackend, args: argparse.Namespace) -> tuple[str, str]:
    """(node name, "name (why, pid N)") of the target."""
    resolved = chaos.resolve_target(backend, args.target, topic=args.topic)
    details = ", ".join(filter(None, [resolved.reason, backend.describe(resolved.name)]))
    return resolved.name, f"{resolved.name} ({details})"


def cmd_fault(args: argparse.Namespace) -> int:
    backend = backend_of(args)
    chaos.parse_target(args.target, args.topic)
    name, who = _resolve(backend, args)
    peers = _peers(args.peers)  # the proxy checks them: node names or groups
    kinds: dict[str, Literal["cut", "delay", "throttle"]] = {
        "isolate": "cut",
        "delay": "delay",
        "throttle": "throttle",
    }
    kind = kinds[args.fault]
    fault = chaos.NetworkFault(
        kind,
        name,
        peers,
        delay_ms=getattr(args, "ms", 0),
        bytes_per_s=getattr(args, "bytes_per_s", 0),
        direction=args.direction,
    )
    changed = backend.network_fault(fault)
    what = {
        "cut": "cut",
        "delay": f"delay {fault.delay_ms} ms",
        "throttle": f"throttle {fault.bytes_per_s} B/s",
    }[kind]
    side = "" if fault.direction == "both" else f" ({fault.direction} only)"
    scope = ", ".join(peers) or "all"
    print(f"{args.fault}: {who} from {scope}{side}: {what} on {', '.join(changed)}")
    return 0


def cmd_heal(args: argparse.Namespace) -> int:
    backend = backend_of(args)
    if args.target is None:
        healed = backend.heal_network(None)
        who = "every link"
    else:
        chaos.parse_target(args.target, args.topic)
        name, who = _resolve(backend, args)
        healed = backend.heal_network(name)
    print(f"heal: {who}: " + (f"healed {', '.join(healed)}" if healed else "nothing was faulted"))
    return 0


def render_links(views: list[LinkView]) -> str:
    lines = [f"{'LINK':<28}{'LISTEN':<17}{'TARGET':<17}{'CONNS':>6}{'BYTES FWD':>12}"
             f"{'BYTES BACK':>12}  STATE"]  # fmt: skip
    for v in views:
        lines.append(
            f"{v.name:<28}{v.spec.listen_address:<17}{v.spec.target_address:<17}"
            f"{v.connections:>6}{v.forward_bytes:>12}{v.backward_bytes:>12}  {v.describe()}"
        )
    faulted = sum(v.faulted for v in views)
    lines.append(f"{len(views)} links, {faulted} faulted (forward: from the link's source)")
    return "\n".join(lines)


def cmd_links(args: argparse.Namespace) -> int:
    views = chaos.ProcessBackend(cluster_dir(args)).network_links()
    if args.json:
        print(json.dumps([v.to_json() for v in views], indent=2))
    else:
        print(render_links(views))
    return 0

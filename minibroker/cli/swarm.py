"""`minibroker swarm lab ...`: a swarm of three Docker engines on this machine (each a container
running its own engine: minibroker/swarm/lab.py), and what happens to its machines: killed,
started, cut from the others, healed. And `--swarm [STACK]` for `minibroker cluster`'s commands
(the stack's tasks: minibroker/swarm/backend.py)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from minibroker.chaos.backend import ChaosError
from minibroker.swarm.access import DEFAULT_STACK, ENGINES_VARIABLE

if TYPE_CHECKING:
    from minibroker.swarm.backend import SwarmBackend


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("swarm", help="a swarm of three Docker engines on this machine (a lab)")
    ssub = p.add_subparsers(dest="swarm_command", required=True)
    lab = ssub.add_parser("lab", help="the lab's machines: up, down, kill, start, cut, heal")
    lsub = lab.add_subparsers(dest="lab_command", required=True)
    up = lsub.add_parser(
        "up",
        help="three engines in containers, joined into a swarm, labelled, the images loaded; "
        'prints the shell lines (`eval "$(minibroker swarm lab up)"`) that point later '
        "commands at it",
    )
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument(
        "--machines-only",
        action="store_true",
        help="only the engines: no swarm, labels or images (deploy/SWARM.md does those)",
    )
    helps = {
        "down": "remove every machine of the lab: containers, volumes, network",
        "exports": "print the shell lines of a lab that is up",
        "kill": "a machine dies: its engine and every container on it at once",
        "start": "a machine comes back (its engine, with its data; tasks stay ended)",
        "cut": "cut a machine from the other machines (this host still reaches it)",
        "heal": "undo `cut`",
    }
    for verb, text in helps.items():
        v = lsub.add_parser(verb, help=text)
        if verb not in ("down", "exports"):
            v.add_argument("node", help="node-1, node-2, ...")
    for parser in lsub.choices.values():
        parser.add_argument(
            "--prefix",
            default=os.environ.get("MINIBROKER_SWARM_LAB") or "mbswarm",
            help="the lab's name (its containers'): $MINIBROKER_SWARM_LAB or mbswarm",
        )
        parser.set_defaults(func=cmd_lab)


def cmd_lab(args: argparse.Namespace) -> int:
    from minibroker.swarm.lab import SwarmLab

    lab = SwarmLab(args.prefix, getattr(args, "nodes", 3))
    verb = args.lab_command
    if verb == "up":
        lab.up(form=not args.machines_only)
        print(lab.exports())
        return 0
    if verb == "down":
        lab.down()
        print(f"# swarm lab {args.prefix}: every machine, volume and network removed")
        return 0
    lab.attach()
    if verb == "exports":
        print(lab.exports())
    elif verb == "kill":
        lab.kill_node(args.node)
        print(f"# {args.node} killed: its engine and every container on it")
    elif verb == "start":
        lab.start_node(args.node)
        print(f"# {args.node} is back: its engine runs (a task that ended stays ended)")
    elif verb == "cut":
        print(f"# cut: {', '.join(lab.cut_node(args.node))}")
    elif verb == "heal":
        lab.heal_node(args.node)
        print(f"# {args.node}: links to the other machines healed")
    return 0


# ---- `minibroker cluster ... --swarm [STACK]` ---------------------------------------------------


def add_swarm_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--swarm",
        nargs="?",
        const=DEFAULT_STACK,
        metavar="STACK",
        help=f"{what} (stack {DEFAULT_STACK} unless named; the manager is $DOCKER_HOST, each "
        f"node's engine in ${ENGINES_VARIABLE})",
    )


def swarm_backend(stack: str, zk: str | None) -> SwarmBackend:
    from minibroker.chaos.factory import DEFAULT_ZK
    from minibroker.swarm.backend import SwarmBackend

    return SwarmBackend(stack, zk or os.environ.get("MINIBROKER_ZK") or DEFAULT_ZK)


def cmd_up(args: argparse.Namespace, env: dict[str, str], timeout_s: float) -> int:
    from minibroker.swarm import cluster
    from minibroker.swarm.access import SwarmAccess

    if args.compose is not None:
        raise ChaosError("give --compose or --swarm, not both")
    if args.secure or args.proxy or args.dashboard is not None:
        raise ChaosError(
            "--secure, --proxy and --dashboard are not for a swarm: the stack file decides "
            "(its dashboard runs on a manager, port 8090); use --compose or process mode"
        )
    stack_file = args.file or cluster.find_stack_file()
    access = SwarmAccess.from_environment()
    print(cluster.up(args.swarm, stack_file, access, env, timeout_s))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from minibroker.swarm import cluster
    from minibroker.swarm.access import SwarmAccess

    rows = cluster.status(args.swarm, SwarmAccess.from_environment())
    print(json.dumps(rows, indent=2) if args.json else cluster.render_status(args.swarm, rows))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from minibroker.swarm import cluster
    from minibroker.swarm.access import SwarmAccess

    print(cluster.down(args.swarm, SwarmAccess.from_environment()))
    return 0


def add_node_parsers(csub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`cluster drain NODE --swarm` and `cluster activate NODE --swarm`."""
    helps = {
        "drain": "drain a swarm node: its tasks are shut down cleanly; a broker pinned to it "
        "stays down (Swarm cannot move a broker's data) until the node is active again and "
        "the broker is started",
        "activate": "make a drained swarm node active again (then `cluster start broker-N "
        "--swarm`)",
    }
    for verb, text in helps.items():
        d = csub.add_parser(verb, help=text)
        d.add_argument("node", help="a swarm node's name (`docker node ls`)")
        add_swarm_argument(d, "the stack")
        d.set_defaults(func=cmd_availability, availability="drain" if verb == "drain" else "active")


def cmd_availability(args: argparse.Namespace) -> int:
    backend = swarm_backend(args.swarm or DEFAULT_STACK, None)
    before = backend.placed_on(args.node)
    backend.set_availability(args.node, args.availability)
    if args.availability == "drain":
        stopped = ", ".join(before) or "none"
        print(f"drain: swarm node {args.node}; its tasks are shut down and not replaced: {stopped}")
    else:
        print(
            f"active: swarm node {args.node}; a task that ended stays ended (`cluster start "
            f"NODE --swarm`)"
        )
    return 0

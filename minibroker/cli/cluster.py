"""`minibroker cluster ...`: run and poke a process-mode cluster."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from minibroker import chaos, localcluster
from minibroker.chaos import compose_up
from minibroker.cli import network, swarm
from minibroker.cli.locate import add_dir_argument, cluster_dir
from minibroker.runtime.settings import PROFILES, Settings
from minibroker.topology import DASHBOARD_PORT

TARGETS = "broker-N, controller-N, zookeeper, controller, leader, follower, leader:TOPIC-P"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("cluster", help="run a local cluster of real processes")
    csub = p.add_subparsers(dest="cluster_command", required=True)

    up = csub.add_parser("up", help="start ZooKeeper, brokers and controllers; wait until ready")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--controllers", type=int, default=2)
    up.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="timings: demo (the default) or kafka (Kafka 2.6's); with --compose, when not "
        "given: $MINIBROKER_PROFILE's",
    )
    up.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting by Kafka's name, for every node (--compose: through $MINIBROKER_SETTINGS)",
    )
    up.add_argument("--zk-port", type=int, default=None, help="pin ZooKeeper's port")
    up.add_argument(
        "--broker-port-base", type=int, default=None, help="broker N listens on BASE+N-1"
    )
    up.add_argument(
        "--kafka-port-base",
        type=int,
        default=None,
        help="broker N's KAFKA listener (Kafka clients) on BASE+N-1, e.g. 9092",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to wait for readiness (--compose: at least 180)",
    )
    up.add_argument(
        "--proxy",
        action="store_true",
        help="route every link (broker<->broker, to ZooKeeper, controller<->broker, clients) "
        "through a fault proxy, for isolate/delay/throttle/heal",
    )
    up.add_argument(
        "--dashboard",
        nargs="?",
        type=int,
        const=DASHBOARD_PORT,
        metavar="PORT",
        help=f"also start the live web dashboard on 127.0.0.1:PORT (default {DASHBOARD_PORT}); "
        "`cluster down` stops it",
    )
    up.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help="start the compose cluster instead (deploy/docker-compose.yml; checks the engine, "
        "the images and the ports first, then waits until every service is healthy)",
    )
    swarm.add_swarm_argument(
        up,
        "deploy deploy/stack.yml as a stack on a swarm instead (deploy/SWARM.md) and wait "
        "until every service is healthy",
    )
    up.add_argument(
        "--file", type=Path, help="with --compose: the compose file; with --swarm: the stack file"
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS, SASL (SCRAM, PLAIN) and ACLs on the brokers' Kafka listeners, a super user "
        "`admin` with a generated password; its client settings in DIR/admin.properties (with "
        "--compose: the secure profile, deploy/docker-compose.secure.yml; the settings in "
        "deploy/secure/ or $MINIBROKER_SECURE_DIR)",
    )
    add_dir_argument(up)
    up.set_defaults(func=cmd_up)

    st = csub.add_parser("status", help="processes, the active controller, registered brokers")
    st.add_argument("--json", action="store_true")
    _add_compose_argument(st, "the compose cluster's containers, their health and ports")
    swarm.add_swarm_argument(st, "the stack's tasks: where each runs, its state and health")
    add_dir_argument(st)
    st.set_defaults(func=cmd_status)

    wt = csub.add_parser(
        "wait",
        help="wait until every service of a compose cluster is healthy (`docker-compose up -d` "
        "has no --wait)",
    )
    wt.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        default=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help=f"the compose project (default {chaos.DEFAULT_PROJECT})",
    )
    wt.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    wt.set_defaults(func=cmd_wait)

    dn = csub.add_parser("down", help="stop every process of the cluster")
    _add_compose_argument(dn, "take the compose cluster down, its volumes too (`down -v`)")
    dn.add_argument("--file", type=Path, help="with --compose: the compose file")
    swarm.add_swarm_argument(dn, "remove the stack, and its volumes on every node named")
    add_dir_argument(dn)
    dn.set_defaults(func=cmd_down)

    helps = {
        "kill": "SIGKILL a node (hard failure: its ZooKeeper session must expire)",
        "stop": "SIGTERM a node (clean shutdown; SIGKILL after 30 s)",
        "pause": "SIGSTOP a node (a stall: it keeps its sockets but does nothing)",
        "resume": "SIGCONT a paused node (also: unpause, as docker compose says)",
        "start": "start a killed or stopped node again with the same settings",
        "restart": "stop a node if it runs, then start it again with the same settings",
    }
    for action in chaos.ACTIONS:
        aliases = ["unpause"] if action == "resume" else []
        a = csub.add_parser(action, help=helps[action], aliases=aliases)
        a.add_argument("target", nargs="?", help=f"{TARGETS} (leader/follower: see --topic)")
        add_dir_argument(a)
        a.add_argument(
            "--compose",
            nargs="?",
            const=chaos.DEFAULT_PROJECT,
            metavar="PROJECT",
            help=f"act on the containers of a compose cluster (project {chaos.DEFAULT_PROJECT})",
        )
        swarm.add_swarm_argument(a, "act on the tasks of a swarm stack, wherever they run")
        a.add_argument(
            "--zk",
            help=f"a compose cluster's ZooKeeper (aliases); $MINIBROKER_ZK or {chaos.DEFAULT_ZK}",
        )
        a.add_argument("--topic", help="leader/follower mean those of partition 0 of this topic")
        a.set_defaults(func=cmd_action, action=action)
    network.add_parsers(csub)
    swarm.add_node_parsers(csub)


COMPOSE_UP_WAIT_S = 180.0


def _add_compose_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--compose",
        nargs="?",
        const=chaos.DEFAULT_PROJECT,
        metavar="PROJECT",
        help=f"{what} (project {chaos.DEFAULT_PROJECT} unless named)",
    )


def cmd_up(args: argparse.Namespace) -> int:
    if args.swarm is not None:
        env = compose_up.environment(args.profile, args.overrides)
        return swarm.cmd_up(args, env, max(args.timeout, COMPOSE_UP_WAIT_S))
    if args.compose is not None:
        compose_file = args.file or compose_up.find_compose_file()
        # Containers start in dependency order (ZooKeeper, brokers, then what needs them), each
        # healthy only after its check passes: on a slow 2-core machine that took over 60 s.
        timeout_s = max(args.timeout, COMPOSE_UP_WAIT_S)
        env = compose_up.environment(args.profile, args.overrides)
        print(compose_up.up(args.compose, compose_file, timeout_s, secure=args.secure, env=env))
        return 0
    d = cluster_dir(args)
    args.profile = args.profile or "demo"
    settings = Settings.load(profile=args.profile, overrides=args.overrides)
    print(settings.profile_summary())
    started = time.monotonic()
    state = localcluster.up(
        d,
        brokers=args.brokers,
        controllers=args.controllers,
        overrides=args.overrides,
        profile=args.profile,
        zk_port=args.zk_port,
        broker_port_base=args.broker_port_base,
        kafka_port_base=args.kafka_port_base,
        ready_timeout_s=args.timeout,
        proxy=args.proxy,
        dashboard_port=args.dashboard,
        secure=args.secure,
    )
    took = time.monotonic() - started
    print(
        f"cluster ready in {took:.1f} s: {len(state.by_role('broker'))} brokers, "
        f"{len(state.by_role('controller'))} controllers, ZooKeeper {state.zk_connect}"
    )
    proxy = state.fault_proxy()
    if proxy is not None:
        print(f"fault proxy {proxy.address}: {len(state.proxy_links)} links (`cluster links`)")
    for dash in state.by_role(localcluster.DASHBOARD):
        print(f"dashboard: {'https' if state.secure else 'http'}://{dash.address}/")
    if state.secure:
        print(f"secure: admin's Kafka client settings in {state.admin_client_config}")
    print(f"state file: {d / localcluster.STATE_FILE}")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    backend = chaos.ComposeBackend(args.compose, chaos.DEFAULT_ZK)
    print(compose_up.wait_healthy(backend, args.timeout))
    return 0


def render_status(st: localcluster.ClusterStatus) -> str:
    state = st.state
    lines = [f"cluster {state.dir}  zookeeper {state.zk_connect}  profile {state.profile}"]
    header = f"{'NAME':<14}{'ROLE':<12}{'ID':>4}  {'PID':>7}  {'ADDRESS':<17}{'STATE':<9}NOTE"
    lines.append(header)
    for p in state.processes:
        note = ""
        if p.role == "broker" and p.id is not None:
            epoch = st.registered.get(p.id)
            note = f"registered (broker epoch {epoch})" if epoch is not None else "not registered"
        elif p.role == "controller":
            note = "active" if p.id == st.controller_id else "standby"
        elif p.role == localcluster.FAULT_PROXY:
            note = f"{len(state.proxy_links)} links (`cluster links`)"
        elif p.role == localcluster.DASHBOARD:
            note = f"http://{p.address}/"
        if p.role == "broker" and p.kafka_port:
            note = f"{note}; Kafka clients: {p.host}:{p.kafka_port}".lstrip("; ")
            if p.kafka_tls_port:
                note += f" (SASL_SSL), {p.host}:{p.kafka_tls_port} (SSL)"
            if p.token_port:
                note += f"; gRPC with a SCRAM login: {p.host}:{p.token_port}"
        if st.process_states[p.name] == "dead" or (
            not st.zk_reachable and p.role not in ("zookeeper", *localcluster.TOOL_ROLES)
        ):
            note = ""
        pid = str(p.pid)
        ident = "-" if p.id is None else str(p.id)
        lines.append(
            f"{p.name:<14}{p.role:<12}{ident:>4}  {pid:>7}  {p.address:<17}"
            f"{st.process_states[p.name]:<9}{note}"
        )
    if st.zk_reachable:
        ctrl = (
            f"{st.controller_name or '?'} (id {st.controller_id}), "
            f"controller epoch {st.controller_epoch}"
            if st.controller_id is not None
            else "none elected"
        )
        lines.append(f"controller: {ctrl}")
        regs = ", ".join(str(b) for b in sorted(st.registered)) or "none"
        lines.append(f"brokers registered in ZooKeeper: {regs}")
    else:
        lines.append("ZooKeeper is not reachable: controller and registrations unknown")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    if args.swarm is not None:
        return swarm.cmd_status(args)
    if args.compose is not None:
        rows = compose_up.status(args.compose)
        text = json.dumps(rows, indent=2) if args.json else None
        print(text or compose_up.render_status(args.compose, rows))
        return 0
    state = localcluster.ClusterState.load(cluster_dir(args))
    st = localcluster.status(state)
    if args.json:
        print(json.dumps(st.to_json(), indent=2))
    else:
        print(render_status(st))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    if args.swarm is not None:
        return swarm.cmd_down(args)
    if args.compose is not None:
        print(compose_up.down(args.compose, args.file or compose_up.find_compose_file()))
        return 0
    state = localcluster.ClusterState.load(cluster_dir(args))
    killed = localcluster.down(state)
    left = [p.name for p in state.processes if localcluster.is_alive(p)]
    if killed:
        print(f"had to SIGKILL: {', '.join(killed)}")
    if left:
        print(f"still running: {', '.join(left)}")
        return 1
    print(f"cluster in {state.dir} is down; no process left")
    return 0


def cmd_action(args: argparse.Namespace) -> int:
    network.take_target_back(args)
    if args.target is None:
        raise chaos.ChaosError(f"{args.action} what? give a target: {TARGETS}")
    chaos.parse_target(args.target, args.topic)  # a typo fails before a cluster is looked for
    backend = network.backend_of(args)
    target = args.target
    resolved = chaos.resolve_target(backend, target, topic=args.topic)
    chaos.perform(backend, args.action, resolved.name)
    details = ", ".join(filter(None, [resolved.reason, backend.describe(resolved.name)]))
    print(f"{args.action}: {resolved.name} ({details})")
    return 0

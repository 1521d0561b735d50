"""`minibroker configs`: Kafka's kafka-configs for topics and brokers, writing ZooKeeper as
`kafka-configs --zookeeper` does (the entity's `/config/<type>/<name>` and a change
notification every broker applies at once).

    minibroker configs --entity-type topics --entity-name T --alter --add-config k=v,k2=[a,b]
    minibroker configs --entity-type brokers --entity-default --alter --delete-config k
    minibroker configs --entity-type topics --entity-name T --describe [--all] [--json]
"""

from __future__ import annotations

import argparse
import json

from minibroker.cli.locate import add_locate_arguments, zk_connect
from minibroker.cli.topics import query_brokers
from minibroker.client import config_zk
from minibroker.client.admin_zk import all_topics, live_brokers
from minibroker.core.broker_config import (
    DEFAULT_ENTITY,
    ConfigSource,
    broker_value_source,
    topic_value_source,
)
from minibroker.core.topic_config import TOPIC_CONFIGS
from minibroker.localcluster import ClusterError, zk_session
from minibroker.runtime.properties import PROPERTY_BY_NAME
from minibroker.runtime.zk_store import ZkStore


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "configs",
        help="describe or change topic and broker configs while the cluster runs",
        description="Kafka's kafka-configs: --alter writes /config/<type>/<name> and a "
        "/config/changes notification; every broker applies it without a restart.",
    )
    p.add_argument("--entity-type", choices=("topics", "brokers"), required=True)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--entity-name", help="the topic, or the broker id")
    which.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide broker default (/config/brokers/<default>)",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print the configs")
    action.add_argument("--alter", action="store_true", help="add or delete configs")
    p.add_argument(
        "--add-config",
        default="",
        metavar="K=V,K2=[A,B]",
        help="configs to set: comma-separated, list values in square brackets",
    )
    p.add_argument("--delete-config", default="", metavar="K,K2", help="configs to remove")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --describe: every config with its value and source, not only overrides",
    )
    p.add_argument("--json", action="store_true")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_configs)


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' --add-config: `k1=v1,k2=[v2,v3]` (brackets keep a list's commas)."""
    out: dict[str, str] = {}
    depth, item = 0, ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if item.strip():
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ClusterError(f"--add-config expects KEY=VALUE, got {item.strip()!r}")
                value = value.strip()
                if value.startswith("[") and value.endswith("]"):
                    value = value[1:-1]
                out[key.strip()] = value
            item = ""
        else:
            item += ch
    if depth != 0:
        raise ClusterError(f"--add-config has unbalanced brackets: {text!r}")
    return out


def _entity(args: argparse.Namespace) -> tuple[str, int | None]:
    if args.entity_type == "topics":
        if not args.entity_name:
            raise ClusterError("--entity-type topics needs --entity-name TOPIC")
        return args.entity_name, None
    if args.entity_default:
        return DEFAULT_ENTITY, None
    if args.entity_name is None:
        raise ClusterError("--entity-type brokers needs --entity-name ID or --entity-default")
    if not args.entity_name.isdigit():
        raise ClusterError(f"a broker's --entity-name is its id, got {args.entity_name!r}")
    return args.entity_name, int(args.entity_name)


def cmd_configs(args: argparse.Namespace) -> int:
    name, broker_id = _entity(args)
    if args.alter and not (args.add_config or args.delete_config):
        raise ClusterError("--alter needs --add-config and/or --delete-config")
    if not args.alter and (args.add_config or args.delete_config):
        raise ClusterError("--add-config and --delete-config go with --alter")
    with zk_session(zk_connect(args)) as zk:
        current = config_zk.read_entity_config(zk, args.entity_type, name)
        if args.alter:
            delete = [k.strip() for k in args.delete_config.split(",") if k.strip()]
            missing = [k for k in delete if k not in current]
            if missing:  # kafka-configs refuses to delete what is not set
                raise ClusterError(
                    f"Invalid config(s): {','.join(missing)} (not set for {args.entity_type} "
                    f"'{name}')"
                )
            new = config_zk.alter_entity(current, parse_add_config(args.add_config), delete)
            if args.entity_type == "topics":
                config_zk.change_topic_config(zk, name, new)
                print(f"Completed updating config for topic {name}.")
            else:
                config_zk.change_broker_config(
                    zk, None if name == DEFAULT_ENTITY else broker_id, new, PROPERTY_BY_NAME
                )
                what = "default brokers" if name == DEFAULT_ENTITY else f"broker {name}"
                print(f"Completed updating config for {what}.")
            return 0
        if args.entity_type == "topics" and name not in all_topics(zk):
            raise ClusterError(f"Topic '{name}' does not exist.")
        rows = _all_rows(zk, args.entity_type, name, current) if args.all else None
    return _print(args, name, current, rows)


def _all_rows(
    zk: ZkStore, entity_type: str, name: str, current: dict[str, str]
) -> list[dict[str, str]]:
    """Every config of the entity with its value and source, as Kafka's DescribeConfigs: the
    brokers' own settings come from DescribeBroker (which of them are set statically)."""
    default = config_zk.read_entity_config(zk, "brokers", DEFAULT_ENTITY)
    brokers = live_brokers(zk)
    wanted = {int(name)} if entity_type == "brokers" and name.isdigit() else set(brokers)
    reports = query_brokers({b: r for b, r in brokers.items() if b in wanted}, 2.0)
    report = next((r for r in reports.values() if r is not None), None)
    static = (
        {k: v for k, v in report.config.items() if k in report.static_config_names}
        if report is not None
        else {}
    )
    rows = []
    if entity_type == "topics":
        own = config_zk.read_entity_config(zk, "brokers", str(report.broker_id)) if report else {}
        for key in sorted(TOPIC_CONFIGS):
            value, source = topic_value_source(key, current, own, default, static)
            rows.append({"name": key, "value": value, "source": source.name})
        return rows
    own = current if name != DEFAULT_ENTITY else {}
    config = report.config if report is not None else {}
    for key in sorted(config):
        found = broker_value_source(key, own, default, static)
        value, source = found if found else (config[key], ConfigSource.DEFAULT_CONFIG)
        rows.append({"name": key, "value": value, "source": source.name})
    return rows


def _print(
    args: argparse.Namespace, name: str, current: dict[str, str], rows: list[dict[str, str]] | None
) -> int:
    if args.json:
        print(json.dumps(rows if rows is not None else current, indent=2))
        return 0
    kind = "topic" if args.entity_type == "topics" else "brokers"
    label = "default" if name == DEFAULT_ENTITY else name
    if rows is None:
        pairs = ",".join(f"{k}={v}" for k, v in sorted(current.items()))
        print(f"Configs for {kind} '{label}' are {pairs}")
        return 0
    print(f"All configs for {kind} '{label}' are:")
    for row in rows:
        print(f"  {row['name']}={row['value']} ({row['source']})")
    return 0

"""kafka-configs: Kafka 2.6's ConfigCommand flags and output (docs/kafka-tools-2.6.md §2) for
topics and brokers, through a broker's Kafka listener (--bootstrap-server: DescribeConfigs,
AlterConfigs) or ZooKeeper (--zookeeper: the config znodes and a change notification, as
AdminZkClient writes them). Users and clients (quotas) and broker-loggers are refused by name."""

from __future__ import annotations

import sys
from typing import Any

from minibroker.client import config_zk
from minibroker.core.broker_config import DEFAULT_ENTITY
from minibroker.core.errors import AdminOperationError, ApiError
from minibroker.kafkatools.common import ToolError, ToolParser, add_connection, admin, zookeeper

TOOL = "kafka-configs"
TYPES = ("topics", "brokers")
ZK_WARNING = (
    "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.\n"
    "Use --bootstrap-server instead to specify a broker to connect to."
)
# DescribeConfigs sources that are overrides, per entity (ConfigCommand without --all).
OVERRIDES = {"topics": {"DYNAMIC_TOPIC_CONFIG"}, "brokers": {"DYNAMIC_BROKER_CONFIG"}}


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Change configs for topics and brokers.")
    add_connection(p, zookeeper=True)
    p.add_argument("--describe", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="every config, not only overrides")
    p.add_argument(
        "--entity-type", choices=("topics", "brokers", "users", "clients", "broker-loggers")
    )
    p.add_argument("--entity-name")
    p.add_argument("--entity-default", action="store_true")
    p.add_argument("--topic", help="= --entity-type topics --entity-name TOPIC")
    p.add_argument("--broker", help="= --entity-type brokers --entity-name ID")
    p.add_argument("--broker-defaults", action="store_true")
    p.add_argument("--add-config", default="", metavar="K1=V1,K2=[V1,V2]")
    p.add_argument("--delete-config", default="", metavar="K1,K2")
    p.add_argument("--force", action="store_true", help="accepted, unused (as in Kafka)")
    return p


def parse_add_config(text: str) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded: commas outside [...] separate, [ ] dropped."""
    items, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    if current:
        items.append(current)
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(
                'Invalid entity config: all configs to be added must be in the format "key=val".'
            )
        out[key.strip()] = value.strip().replace("[", "").replace("]", "")
    return out


def _entity(a: dict[str, Any], p: ToolParser) -> tuple[str, str | None]:
    kind, name = a["entity_type"], a["entity_name"]
    if a["topic"]:
        kind, name = "topics", a["topic"]
    elif a["broker"]:
        kind, name = "brokers", a["broker"]
    elif a["broker_defaults"] or a["entity_default"]:
        kind, name = kind or "brokers", None
    if kind is None:
        p.error("At least one entity type must be specified")
    if kind not in TYPES:
        p.refuse(f"--entity-type {kind}", "topics and brokers only")
    if a["entity_default"] and kind != "brokers":
        p.error("--entity-default: only brokers have one here")
    return kind, name


def _describe_admin(client: Any, kind: str, names: list[str], show_all: bool) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.TOPIC if kind == "topics" else ConfigResourceType.BROKER
    for name in names:
        print(f"{'All' if show_all else 'Dynamic'} configs for {kind[:-1]} {name} are:")
        resource = ConfigResource(rtype, name)
        got = client.describe_configs([resource], include_synonyms=True, config_filter="all")
        entries: dict[str, Any] = next(iter(got.get(kind[:-1], {}).values()), {})
        for key, e in entries.items():
            if not show_all and e.get("config_source") not in OVERRIDES[kind]:
                continue
            synonyms = ", ".join(
                f"{s.get('source', s.get('config_source'))}:{s['name']}={s['value']}"
                for s in e.get("synonyms") or []
            )
            value = "null" if e.get("is_sensitive") else e.get("value")
            sensitive = str(bool(e.get("is_sensitive"))).lower()
            print(f"  {key}={value} sensitive={sensitive} synonyms={{{synonyms}}}")


def _alter_admin(client: Any, kind: str, name: str, add: dict[str, str], delete: list[str]) -> None:
    """IncrementalAlterConfigs: SET each added key, DELETE each deleted one (as Kafka 2.6's
    ConfigCommand alters a topic; it alters a broker with the full-replace AlterConfigs)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.TOPIC if kind == "topics" else ConfigResourceType.BROKER
    got = client.describe_configs([ConfigResource(rtype, name)], config_filter="all")
    entries: dict[str, Any] = next(iter(got.get(kind[:-1], {}).values()), {})
    missing = [k for k in delete if entries.get(k, {}).get("config_source") not in OVERRIDES[kind]]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    changes: dict[str, Any] = {**add, **{k: ("DELETE", None) for k in delete}}
    result = client.alter_configs(
        [ConfigResource(rtype, name, configs=changes)], incremental=True, raise_on_unknown=False
    )
    for outcome in result.get(kind[:-1], {}).values():
        if outcome not in ("OK", None) and not getattr(outcome, "errno", 1) == 0:
            raise ToolError(str(outcome))


def _zk_entity_text(kind: str, name: str | None) -> str:
    type_name = "topic" if kind == "topics" else "brokers"  # ConfigCommand.Entity's typeName
    return f"default {type_name}" if name is None else f"{type_name} '{name}'"


def _run_zk(
    a: dict[str, Any], kind: str, name: str | None, add: dict[str, str], delete: list[str]
) -> None:
    print(ZK_WARNING)
    with zookeeper(a["zookeeper"]) as zk:
        entity = name if name is not None else config_zk.broker_entity(None)
        if a["describe"]:
            names = (
                [entity]
                if name is not None or kind == "brokers"
                else sorted(zk.children("/config/topics"))
            )
            for n in names:
                config = config_zk.read_entity_config(zk, kind, n)
                shown = ",".join(f"{k}={v}" for k, v in config.items())
                entity_text = _zk_entity_text(kind, n if n != DEFAULT_ENTITY else None)
                print(f"Configs for {entity_text} are {shown}")
            return
        current = config_zk.read_entity_config(zk, kind, entity)
        missing = [k for k in delete if k not in current]
        if missing:
            raise ToolError(f"Invalid config(s): {','.join(missing)}")
        new = config_zk.alter_entity(current, add, delete)
        try:
            if kind == "topics":
                config_zk.change_topic_config(zk, entity, new)
            else:
                config_zk.change_broker_config(zk, None if name is None else int(name), new, ())
        except (AdminOperationError, ApiError) as exc:
            raise ToolError(str(exc)) from None
        print(f"Completed updating config for entity: {_zk_entity_text(kind, name)}.")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = vars(parser.parse_args(sys.argv[1:] if argv is None else argv))
    if a["describe"] == a["alter"]:
        parser.error("Command must include exactly one action: --describe, --alter")
    if (a["bootstrap_server"] is None) == (a["zookeeper"] is None):
        parser.error("Exactly one of --bootstrap-server or --zookeeper must be specified")
    if a["all"] and not a["bootstrap_server"]:
        parser.error("--bootstrap-server must be specified for --all")
    kind, name = _entity(a, parser)
    try:
        add = parse_add_config(a["add_config"]) if a["add_config"] else {}
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    delete = [k.strip() for k in a["delete_config"].split(",") if k.strip()]
    if a["alter"] and not (add or delete):
        parser.error(
            "At least one of --add-config, --add-config-file, or --delete-config must be "
            "specified with --alter"
        )
    if a["alter"] and name is None and kind == "topics":
        parser.error("an entity name must be specified with --alter of topics")
    if a["bootstrap_server"] and (a["entity_default"] or a["broker_defaults"]):
        parser.refuse("--entity-default with --bootstrap-server", "use --zookeeper for the default")
    try:
        if a["zookeeper"]:
            _run_zk(a, kind, name, add, delete)
            return 0
        client = admin(a["bootstrap_server"], a["command_config"])
        try:
            if a["describe"]:
                names: list[str] = [name] if name is not None else []
                if name is None and kind == "topics":
                    names = sorted(client.list_topics())
                elif name is None:
                    names = sorted(
                        str(b["broker_id"]) for b in client.describe_cluster()["brokers"]
                    )
                _describe_admin(client, kind, names, a["all"])
            else:
                assert name is not None  # the default entity was refused above
                _alter_admin(client, kind, name, add, delete)
                print(
                    f"Completed updating config for {kind[:-1]} {name}."
                    if name is not None
                    else f"Completed updating default config for {kind} in the cluster."
                )
        finally:
            client.close()
    except ToolError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # ConfigCommand: "Error while executing config command ..."
        print(
            f"Error while executing config command with args '{' '.join(argv or sys.argv[1:])}'",
            file=sys.stderr,
        )
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0

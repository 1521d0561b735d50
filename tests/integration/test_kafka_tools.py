"""Kafka's command-line tools by their names (issue 39 §4, minibroker/kafkatools), run as a
user runs them (bin/*.sh, and the installed console scripts) against a real cluster: each
tool's common flags through --bootstrap-server and, where Kafka 2.6 has it, --zookeeper, with
the output lines scripts parse (docs/kafka-tools-2.6.md), and a flag they do not support
refused with one line naming it."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.runtime.waiting import wait_until
from minibroker.testing import Cluster

pytestmark = pytest.mark.integration

BIN = Path(__file__).resolve().parents[2] / "bin"
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "zookeeper.session.timeout.ms": 6000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(settings=SETTINGS) as c:
        yield c


def tool(
    name: str, *args: str, stdin: str = "", ok: bool = True
) -> subprocess.CompletedProcess[str]:
    got = subprocess.run(
        [str(BIN / f"{name}.sh"), *args], input=stdin, capture_output=True, text=True,
        timeout=120, env={"MINIBROKER_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if ok:
        assert got.returncode == 0, f"{name} {args}: {got.stdout}\n{got.stderr}"
    return got


def test_kafka_topics_create_describe_alter_delete(cluster: Cluster) -> None:
    b, z = cluster.bootstrap_servers, cluster.zookeeper_connect
    created = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "tools",
                   "--partitions", "2", "--replication-factor", "3",
                   "--config", "min.insync.replicas=2")  # fmt: skip
    assert created.stdout == "Created topic tools.\n"
    zk_made = tool("kafka-topics", "--zookeeper", z, "--create", "--topic", "tools_zk",
                   "--partitions", "1", "--replication-factor", "2")  # fmt: skip
    assert "WARNING: Due to limitations in metric names" in zk_made.stdout
    again = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "tools",
                 "--partitions", "1", "--replication-factor", "1", ok=False)  # fmt: skip
    assert again.returncode == 1
    assert again.stdout == "Error while executing topic command : Topic 'tools' already exists.\n"
    tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "tools", "--if-not-exists")
    wait_until(lambda: cluster.leader("tools", 1) >= 0, timeout_s=30, what="tools has leaders")

    def both_listed(flag: str, where: str) -> bool:
        return {"tools", "tools_zk"} <= set(
            tool("kafka-topics", flag, where, "--list").stdout.split()
        )

    for flag, where in (("--bootstrap-server", b), ("--zookeeper", z)):
        # the brokers' metadata follows ZooKeeper's
        wait_until(functools.partial(both_listed, flag, where), timeout_s=30,
                   what=f"both topics listed through {flag}")  # fmt: skip
    described = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "tools")
    lines = described.stdout.splitlines()
    assert (
        lines[0]
        == "Topic: tools\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2"
    )
    for p, line in enumerate(lines[1:]):
        state = cluster.partition("tools", p)
        replicas = ",".join(map(str, state.replicas))
        assert re.fullmatch(
            rf"\tTopic: tools\tPartition: {p}\tLeader: \d\tReplicas: {replicas}\tIsr: [\d,]+", line
        ), line
    zk_described = tool("kafka-topics", "--zookeeper", z, "--describe", "--topic", "tools_zk")
    assert zk_described.stdout.startswith(
        "Topic: tools_zk\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: \n"
    )
    # --topic is a regular expression: both, and nothing of the internal topics.
    both = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "tools.*")
    assert both.stdout.count("PartitionCount") == 2

    tool(
        "kafka-topics", "--bootstrap-server", b, "--alter", "--topic", "tools", "--partitions", "3"
    )
    zk_alter = tool(
        "kafka-topics", "--zookeeper", z, "--alter", "--topic", "tools_zk", "--partitions", "2"
    )
    assert zk_alter.stdout.endswith("Adding partitions succeeded!\n")
    wait_until(
        lambda: cluster.leader("tools", 2) >= 0, timeout_s=30, what="the new partition has a leader"
    )
    assert "PartitionCount: 3" in tool("kafka-topics", "--bootstrap-server", b, "--describe",
                                       "--topic", "tools").stdout  # fmt: skip
    missing = tool(
        "kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "nope", ok=False
    )
    assert (
        missing.stdout
        == "Error while executing topic command : Topic 'nope' does not exist as expected\n"
    )
    tool("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", "nope", "--if-exists")

    deleted = tool("kafka-topics", "--zookeeper", z, "--delete", "--topic", "tools_zk")
    assert deleted.stdout.startswith("Topic tools_zk is marked for deletion.\n")
    wait_until(
        lambda: "tools_zk" not in tool("kafka-topics", "--bootstrap-server", b, "--list").stdout,
        timeout_s=30, what="the controller deleted tools_zk",
    )  # fmt: skip
    refused = tool("kafka-topics", "--bootstrap-server", b, "--list", "--frobnicate", ok=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "kafka-topics: --frobnicate is not supported by minibroker's kafka-topics (see --help)"
    )


def test_kafka_topics_reports_follow_a_dead_broker(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "reports",
         "--partitions", "3", "--replication-factor", "3",
         "--config", "min.insync.replicas=2")  # fmt: skip
    wait_until(
        lambda: all(cluster.leader("reports", p) >= 0 for p in range(3)),
        timeout_s=30,
        what="leaders",
    )
    assert tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "reports",
                "--under-replicated-partitions").stdout == ""  # fmt: skip
    killed = cluster.kill("broker-3")
    try:
        # Out of every ISR: by its leaders' shrinks, or by the controller's election where it
        # led (broker-3 leads one of the three).
        wait_until(
            lambda: all(3 not in cluster.isr("reports", p) for p in range(3)),
            timeout_s=30,
            what="broker 3 out of every ISR of reports",
        )

        def report(flag: str) -> list[str]:
            return tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic",
                        "reports", flag).stdout.splitlines()  # fmt: skip

        # The brokers' metadata follows ZooKeeper's ISR: wait for it.
        def three_under() -> list[str] | None:
            got = report("--under-replicated-partitions")
            return got if len(got) == 3 else None

        under = wait_until(three_under, timeout_s=30, what="3 under-replicated partitions")
        assert all(line.startswith("\tTopic: reports\tPartition: ") for line in under)
        wait_until(lambda: len(report("--at-min-isr-partitions")) == 3, timeout_s=30,
                   what="3 partitions at min ISR")  # fmt: skip
    finally:  # back, and in sync, before the next test needs three brokers
        cluster.start(killed.node)
        cluster.wait_until_fully_replicated("reports")


def test_kafka_configs_describe_and_alter(cluster: Cluster) -> None:
    b, z = cluster.bootstrap_servers, cluster.zookeeper_connect
    cluster.create_topic("configured", partitions=1, replication_factor=3)
    tool("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics",
         "--entity-name", "configured",
         "--add-config", "retention.ms=1000,cleanup.policy=compact")  # fmt: skip
    out = tool(
        "kafka-configs", "--bootstrap-server", b, "--describe", "--topic", "configured"
    ).stdout
    assert out.splitlines()[0] == "Dynamic configs for topic configured are:"
    assert (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000"
        in out
    )
    deleted = tool("kafka-configs", "--bootstrap-server", b, "--alter", "--topic", "configured",
                   "--delete-config", "cleanup.policy")  # fmt: skip
    assert deleted.stdout == "Completed updating config for topic configured.\n"
    zk = tool("kafka-configs", "--zookeeper", z, "--describe", "--entity-type", "topics",
              "--entity-name", "configured").stdout.splitlines()  # fmt: skip
    assert zk[0].startswith("Warning: --zookeeper is deprecated")
    assert zk[2] == "Configs for topic 'configured' are retention.ms=1000"
    zk_alter = tool("kafka-configs", "--zookeeper", z, "--alter", "--entity-type", "topics",
                    "--entity-name", "configured", "--add-config", "retention.ms=2000")  # fmt: skip
    assert zk_alter.stdout.endswith("Completed updating config for entity: topic 'configured'.\n")
    bad = tool("kafka-configs", "--bootstrap-server", b, "--alter", "--topic", "configured",
               "--delete-config", "segment.ms", ok=False)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.strip() == "Invalid config(s): segment.ms"
    brokers = tool(
        "kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers"
    )
    assert brokers.stdout.splitlines() == [
        f"Dynamic configs for broker {i} are:" for i in (1, 2, 3)
    ]
    users = tool(
        "kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type", "users", ok=False
    )
    assert "--entity-type users is not supported by minibroker's kafka-configs" in users.stderr


def test_console_producer_and_consumer(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("console", partitions=1, replication_factor=3)
    produced = tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "console",
                    "--property", "parse.key=true", "--property", "key.separator=:",
                    "--request-required-acks", "all", stdin="k1:v1\nk2:v2\nk3:v3\n")  # fmt: skip
    assert produced.stdout == ">>>>"  # one prompt before every read, as Kafka's
    consumed = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "console",
                    "--from-beginning", "--max-messages", "3", "--property", "print.key=true",
                    "--property", "key.separator=:", "--group", "console-group")  # fmt: skip
    assert consumed.stdout == "k1:v1\nk2:v2\nk3:v3\n"
    assert consumed.stderr.strip().endswith("Processed a total of 3 messages")
    one = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "console",
               "--partition", "0", "--offset", "2", "--timeout-ms", "5000")  # fmt: skip
    assert one.stdout == "v3\n" and "Processed a total of 1 messages" in one.stderr
    no_key = tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "console",
                  "--property", "parse.key=true", stdin="nokey\n", ok=False)  # fmt: skip
    assert no_key.returncode == 1 and "No key found on line 1: nokey" in no_key.stderr


def test_consumer_groups_list_describe_reset_delete(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("grouped", partitions=2, replication_factor=3)
    tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "grouped",
         stdin="".join(f"m{i}\n" for i in range(10)))  # fmt: skip
    tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "grouped",
         "--from-beginning", "--max-messages", "10", "--group", "g-tools")  # fmt: skip
    assert (
        "g-tools" in tool("kafka-consumer-groups", "--bootstrap-server", b, "--list").stdout.split()
    )
    described = tool(
        "kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", "g-tools"
    )
    lines = described.stdout.splitlines()
    assert lines[0] == "" and lines[1].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
        "HOST", "CLIENT-ID",
    ]  # fmt: skip
    rows = sorted(line.split() for line in lines[2:])
    assert sum(int(r[3]) for r in rows) == 10 and all(r[5] == "0" for r in rows), rows
    assert "Consumer group 'g-tools' has no active members." in described.stderr
    state = tool("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group",
                 "g-tools", "--state").stdout.splitlines()  # fmt: skip
    assert state[1].split()[:3] == ["GROUP", "COORDINATOR", "(ID)"] and "Empty" in state[2]
    reset = tool("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group",
                 "g-tools", "--topic", "grouped", "--to-earliest", "--execute").stdout  # fmt: skip
    assert [line.split() for line in reset.splitlines()[2:]] == [
        ["g-tools", "grouped", "0", "0"], ["g-tools", "grouped", "1", "0"],
    ]  # fmt: skip
    after = tool(
        "kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", "g-tools"
    )
    assert all(r.split()[3] == "0" for r in after.stdout.splitlines()[2:])
    missing = tool(
        "kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", "nope"
    )
    assert missing.stdout == "\nError: Consumer group 'nope' does not exist.\n"
    deleted = tool(
        "kafka-consumer-groups", "--bootstrap-server", b, "--delete", "--group", "g-tools"
    )
    assert deleted.stdout == "Deletion of requested consumer groups ('g-tools') was successful.\n"


def test_delete_records_and_reassign_partitions(cluster: Cluster, tmp_path: Path) -> None:
    b, z = cluster.bootstrap_servers, cluster.zookeeper_connect
    cluster.create_topic("moved", partitions=2, replication_factor=2)
    tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "moved",
         "--request-required-acks", "all", stdin="".join(f"r{i}\n" for i in range(6)))  # fmt: skip
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [
        {"topic": "moved", "partition": 0, "offset": -1},
        {"topic": "moved", "partition": 7, "offset": 1}], "version": 1}))  # fmt: skip
    deleted = tool(
        "kafka-delete-records", "--bootstrap-server", b, "--offset-json-file", str(offsets)
    )
    lines = deleted.stdout.splitlines()
    assert lines[:2] == [
        "Executing records delete operation",
        "Records delete operation completed:",
    ]
    hw = cluster.partition("moved", 0).high_watermark
    assert lines[2] == f"partition: moved-0\tlow_watermark: {hw}"
    assert lines[3].startswith("partition: moved-7\terror: ")

    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": [{"topic": "moved"}], "version": 1}')
    generated = tool("kafka-reassign-partitions", "--bootstrap-server", b, "--generate",
                     "--topics-to-move-json-file", str(topics),
                     "--broker-list", "1,2,3")  # fmt: skip
    out = generated.stdout.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert out[3] == "Proposed partition reassignment configuration"
    target = {"version": 1, "partitions": [
        {"topic": "moved", "partition": p, "replicas": [3, 1] if p == 0 else [2, 3]}
        for p in (0, 1)]}  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(target))
    executed = tool("kafka-reassign-partitions", "--bootstrap-server", b, "--execute",
                    "--reassignment-json-file", str(plan), "--throttle", "50000000")  # fmt: skip
    assert executed.stdout.splitlines()[-1] == (
        "Successfully started partition reassignments for moved-0,moved-1"
    )

    def complete() -> bool:
        got = tool("kafka-reassign-partitions", "--bootstrap-server", b, "--verify",
                   "--reassignment-json-file", str(plan)).stdout  # fmt: skip
        return "is still in progress" not in got and "Clearing topic-level throttles" in got

    wait_until(complete, timeout_s=60, what="the reassignment completes")
    assert cluster.partition("moved", 0).replicas == (3, 1)
    zk = tool("kafka-reassign-partitions", "--zookeeper", z, "--verify",
              "--reassignment-json-file", str(plan)).stdout  # fmt: skip
    assert "Reassignment of partition moved-1 is complete." in zk
    assert tool("kafka-reassign-partitions", "--bootstrap-server", b, "--list").stdout == (
        "No partition reassignments found.\n"
    )


def test_kafka_acls_in_zookeeper(cluster: Cluster) -> None:
    z = f"zookeeper.connect={cluster.zookeeper_connect}"
    added = tool("kafka-acls", "--authorizer-properties", z, "--add", "--allow-principal",
                 "User:alice", "--operation", "Read", "--operation", "Describe",
                 "--topic", "acl-t")  # fmt: skip
    assert added.stdout.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, "
        "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation="
    )
    listed = tool("kafka-acls", "--authorizer-properties", z, "--list", "--topic", "acl-t").stdout
    assert "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    tool("kafka-acls", "--authorizer-properties", z, "--remove", "--force", "--allow-principal",
         "User:alice", "--operation", "Read", "--topic", "acl-t")  # fmt: skip
    left = tool("kafka-acls", "--authorizer-properties", z, "--list", "--topic", "acl-t").stdout
    assert "operation=READ" not in left and "operation=DESCRIBE" in left


def test_the_console_scripts_are_installed(cluster: Cluster) -> None:
    script = Path(sys.executable).parent / "kafka-topics"
    got = subprocess.run([str(script), "--bootstrap-server", cluster.bootstrap_servers, "--list"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert got.returncode == 0, got.stderr

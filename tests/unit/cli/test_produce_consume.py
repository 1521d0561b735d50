"""`minibroker produce` and `consume`: flags, stdin lines, output lines, how brokers are found,
and whole runs against the in-memory FakeCluster (no network)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from minibroker import locate
from minibroker.cli.consume import UntilHw, consume, format_record, output_lines
from minibroker.cli.main import build_parser, main
from minibroker.cli.produce import (
    LineSplitter,
    MissingKeySeparator,
    Reporter,
    Sent,
    produce_lines,
    result_line,
    split_key,
    stdin_chunks,
)
from minibroker.client.consumer import Consumer
from minibroker.client.errors import ClientError, ProduceError
from minibroker.client.fetch_state import ConsumerRecord
from minibroker.client.producer import Producer
from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.localcluster import ClusterError, ClusterState, ProcessInfo
from tests.unit.client.fake_cluster import FakeCluster

TP0 = TopicPartition("t", 0)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


# ---- flags -------------------------------------------------------------------------------------


def test_produce_flags_and_defaults() -> None:
    args = parse("produce", "t")
    assert (args.topic, args.acks, args.partition, args.key_separator) == ("t", -1, None, None)
    assert (args.json, args.linger_ms) == (False, 5)
    args = parse("produce", "t", "--acks", "1", "--partition", "2", "--key-separator", ":")
    assert (args.acks, args.partition, args.key_separator) == (1, 2, ":")
    assert parse("produce", "t", "--acks", "all").acks == -1
    assert parse("produce", "t", "--acks", "0", "--json", "--linger-ms", "0").acks == 0


def test_consume_flags_and_defaults() -> None:
    args = parse("consume", "t")
    assert (args.from_beginning, args.partition, args.until_hw, args.json) == (
        False,
        None,
        False,
        False,
    )
    assert args.max_records is None and args.timeout_ms is None
    args = parse("consume", "t", "--from-beginning", "--until-hw", "--max-records", "3")
    assert (args.from_beginning, args.until_hw, args.max_records) == (True, True, 3)


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "t", "--acks", "2"],
        ["produce", "t", "--partition", "-1"],
        ["produce", "t", "--linger-ms", "x"],
        ["produce"],
        ["consume", "t", "--max-records", "0"],
        ["consume", "t", "--timeout-ms", "-5"],
    ],
)
def test_bad_flags_exit_2_with_one_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


# ---- stdin and output lines --------------------------------------------------------------------


def test_line_splitter_joins_chunks_and_drops_newlines() -> None:
    s = LineSplitter()
    assert s.feed(b"a\nb") == [b"a"]
    assert s.feed(b"c\r\n\nd") == [b"bc", b""]
    assert s.finish() == [b"d"]
    assert s.finish() == []


def test_split_key() -> None:
    assert split_key(b"k:v:w", b":") == (b"k", b"v:w")
    assert split_key(b"k:v", None) == (None, b"k:v")
    assert split_key(b":v", b":") == (b"", b"v")
    with pytest.raises(MissingKeySeparator):
        split_key(b"novalue", b":")


def test_result_lines() -> None:
    sent = Sent(3, b"k", b"v\xff")
    ok = json.loads(result_line(sent, "t", RecordMetadata("t", 1, 42, 0)))
    assert ok == {"topic": "t", "partition": 1, "offset": 42, "key": "k", "value": "v\ufffd"}
    bad = json.loads(result_line(sent, "t", ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS, "x")))
    assert bad["error"] == "NOT_ENOUGH_REPLICAS" and bad["line"] == 3 and bad["value"] == "v\ufffd"
    missing = json.loads(result_line(Sent(1, None, b"v"), "t", MissingKeySeparator("no")))
    assert missing["error"] == "MISSING_KEY_SEPARATOR" and missing["key"] is None


def rec(offset: int, value: bytes | None, key: bytes | None = None) -> ConsumerRecord:
    return ConsumerRecord("t", 0, offset, 0, key, value)


def test_format_record() -> None:
    assert format_record(rec(0, b"hello"), as_json=False) == "hello"
    assert format_record(rec(0, None), as_json=False) == "null"
    assert format_record(rec(0, b"\xff"), as_json=False) == "\ufffd"
    assert json.loads(format_record(rec(5, b"v", b"k"), as_json=True)) == {
        "topic": "t",
        "partition": 0,
        "offset": 5,
        "key": "k",
        "value": "v",
    }


def test_output_lines_stop_at_max_records_and_at_the_start_hw() -> None:
    records = [rec(i, str(i).encode()) for i in range(5)]
    args = argparse.Namespace(json=False, max_records=None)
    assert output_lines(records, args, None, 0) == ["0", "1", "2", "3", "4"]
    args.max_records = 4
    assert output_lines(records, args, None, 2) == ["0", "1"]
    args.max_records = None
    assert output_lines(records, args, UntilHw({TP0: 3}), 0) == ["0", "1", "2"]


def test_until_hw_tracks_partitions_reaching_their_mark() -> None:
    tp1 = TopicPartition("t", 1)
    until = UntilHw({TP0: 3, tp1: 0})
    until.update(tp1, 0)
    assert not until.finished()
    until.update(TP0, 2)
    assert until.lagging({TP0: 2, tp1: 0}) == "t-0 at 2 of 3"
    until.update(TP0, 3)
    assert until.finished()


# ---- finding brokers ---------------------------------------------------------------------------


def locate_args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"bootstrap": None, "zk": None, "dir": None, **kw})


def write_cluster(path: Path) -> None:
    path.mkdir()
    state = ClusterState(dir=str(path), zk_connect="127.0.0.1:2181", profile="demo")
    for i, role in [(0, "zookeeper"), (1, "broker"), (2, "broker"), (101, "controller")]:
        state.processes.append(
            ProcessInfo(f"{role}-{i}", role, i, "127.0.0.1", 9000 + i, "", "", [])
        )
    state.save()


def test_bootstrap_servers_in_order_of_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MINIBROKER_BOOTSTRAP", raising=False)
    monkeypatch.delenv("MINIBROKER_ZK", raising=False)
    monkeypatch.setenv("MINIBROKER_DIR", str(tmp_path / "none"))
    monkeypatch.setattr(locate, "brokers_in_zookeeper", lambda zk: [f"from-zk-{zk}:1"])
    write_cluster(tmp_path / "c")
    assert locate.bootstrap_servers(locate_args(bootstrap="a:1, b:2,a:1")) == ["a:1", "b:2"]
    assert locate.bootstrap_servers(locate_args(zk="z:2181", bootstrap="a:1")) == ["a:1"]
    assert locate.bootstrap_servers(locate_args(zk="z:2181")) == ["from-zk-z:2181:1"]
    assert locate.bootstrap_servers(locate_args(dir=tmp_path / "c")) == [
        "127.0.0.1:9001",
        "127.0.0.1:9002",
    ]
    monkeypatch.setenv("MINIBROKER_ZK", "y:1")
    assert locate.bootstrap_servers(locate_args()) == ["from-zk-y:1:1"]
    monkeypatch.setenv("MINIBROKER_BOOTSTRAP", "e:5")
    assert locate.bootstrap_servers(locate_args()) == ["e:5"]
    monkeypatch.delenv("MINIBROKER_BOOTSTRAP")
    monkeypatch.delenv("MINIBROKER_ZK")
    monkeypatch.setenv("MINIBROKER_DIR", str(tmp_path / "c"))
    assert locate.bootstrap_servers(locate_args()) == ["127.0.0.1:9001", "127.0.0.1:9002"]


def test_bootstrap_servers_errors_are_cluster_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MINIBROKER_BOOTSTRAP", raising=False)
    monkeypatch.delenv("MINIBROKER_ZK", raising=False)
    monkeypatch.setenv("MINIBROKER_DIR", str(tmp_path / "none"))
    with pytest.raises(ClusterError, match="cannot find a broker"):
        locate.bootstrap_servers(locate_args())
    with pytest.raises(ClusterError, match="host:port"):
        locate.bootstrap_servers(locate_args(bootstrap="nohost"))
    with pytest.raises(ClusterError, match="no cluster"):
        locate.bootstrap_servers(locate_args(dir=tmp_path / "none"))


def test_main_prints_one_line_for_a_bad_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["consume", "t", "--bootstrap", "nohost"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("minibroker: bad --bootstrap")


# ---- whole runs against the FakeCluster --------------------------------------------------------


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def run_produce(cluster: FakeCluster, stdin: list[bytes], *argv: str) -> tuple[list[str], int]:
    args = parse("produce", "t", *argv)
    lines: list[str] = []
    reporter = Reporter("t", args.json, lines.append)

    async def go() -> None:
        async with Producer(
            cluster.addresses[1], channels=cluster, linger_ms=1, retry_backoff_ms=5
        ) as p:
            await produce_lines(p, args, chunks(*stdin), reporter)

    asyncio.run(go())
    return lines, reporter.failed


def test_produce_json_reports_each_record_and_failures(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 2)
    lines, failed = run_produce(
        cluster, [b"k1:v1\nnosep\n", b"k2:v2"], "--json", "--key-separator", ":", "--partition", "1"
    )
    out = [json.loads(line) for line in lines]
    assert failed == 1
    assert out[0]["error"] == "MISSING_KEY_SEPARATOR" and out[0]["line"] == 2
    assert [(o["key"], o["value"], o["partition"], o["offset"]) for o in out[1:]] == [
        ("k1", "v1", 1, 0),
        ("k2", "v2", 1, 1),
    ]


def test_produce_plain_prints_failures_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.errors[("Produce", TP0)] = [ErrorCode.INVALID_RECORD]
    lines, failed = run_produce(cluster, [b"a\n"])
    assert lines == [] and failed == 1
    assert "line 1 not written: INVALID_RECORD" in capsys.readouterr().err


def run_consume(cluster: FakeCluster, *argv: str) -> tuple[list[str], int]:
    args = parse("consume", "t", *argv)
    out: list[str] = []
    reset = "earliest" if args.from_beginning else "latest"

    async def go() -> int:
        async with Consumer(
            cluster.addresses[2],
            channels=cluster,
            max_wait_ms=5,
            retry_backoff_ms=5,
            auto_offset_reset=reset,  # type: ignore[arg-type]
        ) as c:
            return await consume(c, args, out.extend)

    return out, asyncio.run(asyncio.wait_for(go(), 10))


def filled_cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.create_topic("t", 2)
    run_produce(cluster, [b"a\nb\nc\n"], "--partition", "0")
    run_produce(cluster, [b"d\n"], "--partition", "1")
    return cluster


def test_consume_until_hw_prints_everything_then_exits() -> None:
    out, code = run_consume(filled_cluster(), "--from-beginning", "--until-hw")
    assert code == 0 and sorted(out) == ["a", "b", "c", "d"]


def test_consume_one_partition_as_json_up_to_max_records() -> None:
    out, code = run_consume(
        filled_cluster(), "--from-beginning", "--partition", "0", "--json", "--max-records", "2"
    )
    assert code == 0
    assert [(o["partition"], o["offset"], o["value"]) for o in map(json.loads, out)] == [
        (0, 0, "a"),
        (0, 1, "b"),
    ]


def test_consume_from_the_end_exits_after_the_idle_timeout() -> None:
    out, code = run_consume(filled_cluster(), "--timeout-ms", "50")
    assert (out, code) == ([], 0)


def test_consume_until_hw_that_times_out_says_where_it_stopped() -> None:
    cluster = filled_cluster()
    cluster.errors[("Fetch", TP0)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000
    with pytest.raises(ClientError, match="t-0 at 0 of 3"):
        run_consume(cluster, "--from-beginning", "--until-hw", "--timeout-ms", "100")


def test_consume_unknown_partition_is_an_unknown_topic_error() -> None:
    with pytest.raises(ClientError, match="no partition 7"):
        run_consume(filled_cluster(), "--partition", "7")


def test_stdin_chunks_read_a_pipe_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"one\ntwo\n")
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)

        async def collect() -> bytes:
            return b"".join([chunk async for chunk in stdin_chunks()])

        assert asyncio.run(collect()) == b"one\ntwo\n"

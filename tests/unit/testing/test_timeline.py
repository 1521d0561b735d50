"""The timeline read incrementally from the processes' logs (minibroker/testing/timeline.py):
new whole lines only, a restarted file read from its start, events merged by time."""

from __future__ import annotations

import json
from pathlib import Path

from minibroker.localcluster import ClusterState, ProcessInfo
from minibroker.testing.timeline import Timeline


def line(ts: int, proc: str, event: str, **fields: object) -> str:
    return json.dumps({"ts": ts, "level": "INFO", "proc": proc, "event": event, **fields}) + "\n"


def state(tmp_path: Path) -> ClusterState:
    s = ClusterState(dir=str(tmp_path), zk_connect="127.0.0.1:1", profile="demo")
    for name, role in (
        ("broker-1", "broker"),
        ("controller-1", "controller"),
        ("zookeeper", "zookeeper"),
    ):
        log = str(tmp_path / f"{name}.log")
        s.processes.append(
            ProcessInfo(name=name, role=role, id=None, host="127.0.0.1", port=1,
                        data_dir=str(tmp_path), log_file=log, cmd=[])
        )  # fmt: skip
    return s


def test_new_whole_lines_are_read_and_merged_by_time(tmp_path: Path) -> None:
    s = state(tmp_path)
    broker, controller = tmp_path / "broker-1.log", tmp_path / "controller-1.log"
    broker.write_text(line(10, "broker-1", "isr_shrink", tp="t-0") + "not json\n")
    controller.write_text(line(5, "controller-1", "controller_elected", controller_id=101))
    (tmp_path / "zookeeper.log").write_text(line(1, "zookeeper", "ignored"))
    timeline = Timeline()
    assert [(e.ts_ms, e.kind) for e in timeline.read(s)] == [
        (5, "controller_elected"),
        (10, "isr_shrink"),
    ]
    with broker.open("a") as f:
        f.write(line(20, "broker-1", "isr_expand", tp="t-0"))
        f.write('{"ts": 30, "event": "half')  # a line still being written
    got = timeline.read(s, since_ms=10)
    assert [(e.ts_ms, e.kind, e.tp) for e in got] == [
        (10, "isr_shrink", "t-0"),
        (20, "isr_expand", "t-0"),
    ]
    with broker.open("a") as f:
        f.write('_written"}\n')
    assert [e.kind for e in timeline.read(s, since_ms=25)] == ["half_written"]


def test_a_file_that_shrank_is_read_again_from_its_start(tmp_path: Path) -> None:
    s = state(tmp_path)
    broker = tmp_path / "broker-1.log"
    broker.write_text(line(1, "broker-1", "a") + line(2, "broker-1", "b"))
    timeline = Timeline()
    assert len(timeline.read(s)) == 2
    broker.write_text(line(3, "broker-1", "c"))
    assert [e.kind for e in timeline.read(s)] == ["c"]

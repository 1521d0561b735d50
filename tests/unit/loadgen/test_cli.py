"""The load generator's flags, the pure helpers of its Spark jobs, and `minibroker loadgen`
handing its arguments over; nothing here starts Spark or a cluster."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from loadgen.cli import build_parser, main, parse_seconds
from loadgen.job import default_tasks, generate, output_schema, spark_error_line
from loadgen.plan import UsageError, plan_run
from loadgen.progress import progress_line
from loadgen.spark import master_cores
from loadgen.verify import starting_offsets_option
from loadgen.workload import WorkloadSpec, record
from minibroker.cli import main as minibroker_main


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_a_batch_plan() -> None:
    plan = plan_run(parse("--records", "500", "--keys", "7", "--seed", "3", "--out", "/tmp/x"))
    assert plan.spec == WorkloadSpec(records=500, keys=7, seed=3)
    assert (plan.rate, plan.duration_s, plan.faults, plan.out_dir) == (
        None,
        None,
        [],
        Path("/tmp/x"),
    )


def test_faults_on_a_compose_cluster() -> None:
    args = parse("--records", "5", "--compose", "--fault", "at=1s pause follower")
    assert args.compose == "minibroker" and args.dir is None
    assert [f.target for f in plan_run(args).faults] == ["follower"]
    assert parse("--records", "5", "--compose", "demo").compose == "demo"


def test_a_streaming_plan_has_rate_times_duration_records() -> None:
    plan = plan_run(parse("--rate", "300", "--duration", "1.5s"))
    assert (plan.rate, plan.duration_s, plan.spec.records) == (300, 1.5, 450)
    assert plan.out_dir.parent == Path("loadgen-runs")


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "give --records N, or --rate R with --duration S"),
        (["--rate", "10"], "give --records N, or --rate R with --duration S"),
        (["--records", "5", "--rate", "10", "--duration", "1"], "not both"),
        (["--records", "5", "--fault", "at=1s kill leader"], "--fault needs --dir"),
        (
            ["--records", "5", "--dir", "/x", "--compose"],
            "give one of --dir, --compose and --swarm",
        ),
        (["--records", "5", "--compose", "--swarm"], "give one of --dir, --compose and --swarm"),
    ],
)
def test_flag_combinations_that_make_no_run(argv: list[str], complaint: str) -> None:
    with pytest.raises(UsageError, match=complaint):
        plan_run(parse(*argv))


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--records", "0"], "argument --records: must be >= 1, got 0"),
        (["--records", "5", "--acks", "2"], "argument --acks: invalid choice"),
        (["--rate", "5", "--duration", "soon"], "expected a positive duration"),
        (["--records", "5", "--record-size", "8"], "record size must be at least 32"),
        (["--records", "5", "--dir", "/x", "--fault", "at=1s kill all"], "target must be"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        sys.exit(main(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert complaint in err and err.count("\n") == 1 and err.startswith("loadgen: error: ")


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("1.5s", 1.5), ("500ms", 0.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


def test_generate_turns_sequence_numbers_into_record_batches() -> None:
    spec = WorkloadSpec(records=10, record_size=40, keys=3, partitions=2, seed=9)
    ids = pa.RecordBatch.from_arrays([pa.array([4, 5, 6], pa.int64())], names=["id"])
    (batch,) = list(generate(spec, "id", [ids]))
    assert batch.schema.names == ["key", "value", "partition"]
    assert batch.schema.field("partition").type == pa.int32()
    rows = list(zip(*(batch.column(n).to_pylist() for n in batch.schema.names), strict=True))
    assert rows == [record(spec, i) for i in (4, 5, 6)]
    assert output_schema(spec) == "key binary, value binary, partition int"
    no_partition = WorkloadSpec(records=10, record_size=40)
    assert next(generate(no_partition, "id", [ids])).schema.names == ["key", "value"]
    assert output_schema(no_partition) == "key binary, value binary"


@pytest.mark.parametrize(
    ("records", "cores", "tasks"), [(10_000, 2, 2), (1_000_000, 2, 5), (1_000_001, 8, 8)]
)
def test_default_tasks(records: int, cores: int, tasks: int) -> None:
    assert default_tasks(records, cores) == tasks


@pytest.mark.parametrize(
    ("master", "cores"), [("local", 1), ("local[2]", 2), ("local[3,4]", 3), ("spark://h:7077", 2)]
)
def test_master_cores(master: str, cores: int) -> None:
    assert master_cores(master) == cores


def test_spark_errors_shrink_to_the_telling_line() -> None:
    text = (
        "An error occurred while calling o61.save.\n: org.apache.spark.SparkException: Job "
        'aborted.\n  File "x.py", line 3\nloadgen.source_options.MinibrokerSourceError: '
        "topic 'lg' does not exist at h:1\n"
    )
    assert spark_error_line(RuntimeError(text)) == "topic 'lg' does not exist at h:1"
    assert spark_error_line(RuntimeError("boom\nValueError: bad")) == "ValueError: bad"
    assert spark_error_line(RuntimeError("\n just this\n")) == "just this"


def test_starting_offsets_skip_a_new_topic() -> None:
    assert starting_offsets_option("t", {0: 0, 1: 0}) == "earliest"
    assert starting_offsets_option("t", {1: 5, 0: 0}) == '{"t": {"0": 0, "1": 5}}'


def test_progress_lines() -> None:
    assert progress_line(10.0, 5000, 2500, 5.0) == (
        "loadgen:   10.0 s: 5,000 records in the topic (500/s)"
    )
    assert "unavailable" in progress_line(10.0, None, 2500, 5.0)


def test_minibroker_loadgen_runs_python_m_loadgen_with_the_same_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[list[str]] = []

    def call(cmd: list[str]) -> int:
        calls.append(cmd)
        return 3

    monkeypatch.setattr(subprocess, "call", call)
    assert minibroker_main.main(["loadgen", "--records", "5", "--help"]) == 3
    assert calls == [[sys.executable, "-m", "loadgen", "--records", "5", "--help"]]


def test_minibroker_loadgen_end_to_end_refusal() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", "loadgen", "--records", "1", "--rate", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr == "loadgen: error: give either --records or --rate with --duration, not both\n"
    )


def test_transactional_needs_the_kafka_protocol_and_acks_all() -> None:
    with pytest.raises(UsageError, match="--transactional needs --protocol kafka"):
        plan_run(parse("--records", "10", "--transactional"))
    with pytest.raises(UsageError, match="--transactional needs"):
        plan_run(parse("--records", "10", "--transactional", "--protocol", "kafka", "--acks", "1"))
    assert plan_run(parse("--records", "10", "--transactional", "--protocol", "kafka")).spec

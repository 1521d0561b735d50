"""What `Cluster(compose=True)` cannot do is refused before anything starts, each with one line
saying what to do instead; and the settings it can carry reach the compose file's variables."""

from __future__ import annotations

import pytest

from minibroker.localcluster import ClusterError
from minibroker.testing import Cluster
from minibroker.testing.compose_deployment import environment


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"brokers": 5}, "3 brokers and 2 controllers, not 5 and 2"),
        ({"proxy": True}, "drop proxy=True"),
        ({"directory": "/tmp/x"}, "drop directory="),
        ({"kafka_port_base": 10000}, "drop kafka_port_base="),
    ],
)
def test_what_the_compose_file_decides_is_refused(kwargs: dict[str, object], said: str) -> None:
    with pytest.raises(ClusterError, match=said):
        Cluster(compose=True, **kwargs)  # type: ignore[arg-type]


def test_compose_arguments_are_refused_in_process_mode() -> None:
    with pytest.raises(ClusterError, match="compose=True's"):
        Cluster(project="p")


def test_settings_go_through_minibroker_settings_or_are_refused() -> None:
    env = environment("kafka", {"replica.lag.time.max.ms": "3000", "min.insync.replicas": "2"})
    assert env == {
        "MINIBROKER_PROFILE": "kafka",
        "MINIBROKER_SETTINGS": "replica.lag.time.max.ms=3000 min.insync.replicas=2",
    }
    with pytest.raises(ClusterError, match="space or comma"):
        environment("demo", {"log.dirs.x": "a,b"})
    with pytest.raises(ClusterError, match="the compose file sets where nodes listen"):
        environment("demo", {"listeners": "PLAINTEXT://0.0.0.0:1"})
    with pytest.raises(ClusterError, match="no.such.setting"):
        environment("demo", {"no.such.setting": "1"})

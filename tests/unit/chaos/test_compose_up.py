"""`minibroker cluster up --compose`'s checks and its wait, against fakes of the Docker SDK (the
real engine runs them in tests/compose)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound

from minibroker.chaos import ChaosError, compose_up


class Images:
    def __init__(self, have: set[str]) -> None:
        self.have = have

    def get(self, name: str) -> str:
        if name not in self.have:
            raise ImageNotFound(f"No such image: {name}")
        return name


class Client:
    def __init__(self, images: set[str]) -> None:
        self.images = Images(images)


class Backend:
    """ComposeBackend's health(), one answer per call (the last repeats)."""

    project = "mb"

    def __init__(self, *answers: dict[str, str]) -> None:
        self.answers = list(answers)

    def health(self) -> dict[str, str]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_missing_images_name_the_build_script() -> None:
    with pytest.raises(ChaosError, match=r"minibroker-zookeeper:dev are not built.*build-images"):
        compose_up.preflight("mb", Client({"minibroker:dev"}))


def test_the_wait_returns_once_every_service_is_healthy() -> None:
    backend: Any = Backend(
        {"broker-1": "starting", "zookeeper": "healthy"},
        {"broker-1": "healthy", "zookeeper": "healthy"},
    )
    line = compose_up.wait_healthy(backend, timeout_s=10)
    assert line.startswith("compose project 'mb': 2 services up in ")


def test_an_unhealthy_service_is_waited_for_as_a_resumed_one_recovers() -> None:
    backend: Any = Backend(
        {"broker-1": "unhealthy", "zookeeper": "healthy"},
        {"broker-1": "healthy", "zookeeper": "healthy"},
    )
    assert compose_up.wait_healthy(backend, timeout_s=10).endswith(
        "broker-1 healthy, zookeeper healthy"
    )
    with pytest.raises(ChaosError, match="is not healthy after 0 s: broker-1 unhealthy"):
        compose_up.wait_healthy(Backend({"broker-1": "unhealthy"}), timeout_s=0)  # type: ignore[arg-type]


def test_an_exited_service_fails_the_wait_at_once_and_none_at_all_says_to_start() -> None:
    backend: Any = Backend({"broker-1": "exited", "zookeeper": "healthy"})
    with pytest.raises(ChaosError, match="is not healthy: broker-1 exited"):
        compose_up.wait_healthy(backend, timeout_s=60)
    with pytest.raises(ChaosError, match="has no container: start it"):
        compose_up.wait_healthy(Backend({}), timeout_s=0)  # type: ignore[arg-type]


def test_the_compose_file_is_found_from_the_checkout_or_its_deploy_folder(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "docker-compose.yml").write_text("services: {}\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    want = tmp_path / "deploy" / "docker-compose.yml"
    assert compose_up.find_compose_file(tmp_path / "a") == want.resolve()
    assert compose_up.find_compose_file(tmp_path / "deploy") == want.resolve()
    with pytest.raises(ChaosError, match="give --file"):
        compose_up.find_compose_file(Path("/"))

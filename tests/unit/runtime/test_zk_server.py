"""Finding ZooKeeper, and the message when it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.runtime import zk_server


def test_missing_zookeeper_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINIBROKER_ZOOKEEPER_CLASSPATH", raising=False)
    monkeypatch.setattr(zk_server, "_DEBIAN_JARS", ("/nonexistent/zookeeper.jar",))
    with pytest.raises(zk_server.ZooKeeperNotFound, match="apt-get install zookeeper"):
        zk_server.find_zookeeper()


def test_missing_java_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(zk_server.ZooKeeperNotFound, match="java is not on PATH"):
        zk_server.find_zookeeper()


def test_config_is_loopback_with_short_ticks(tmp_path: Path) -> None:
    cfg = zk_server.write_config(tmp_path, 2999).read_text()
    assert "clientPortAddress=127.0.0.1" in cfg
    assert "clientPort=2999" in cfg
    assert "maxSessionTimeout=60000" in cfg


def test_four_letter_word_to_a_closed_port_is_none() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert zk_server.four_letter("127.0.0.1", port, timeout_s=0.2) is None

"""ZooKeeper's vocabulary for the rest of the code: our exception classes (kazoo's exceptions
mapped to them, as kazoo maps server codes), session states, Stat and Node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from kazoo import exceptions as kz_exc

T = TypeVar("T")


class ZkError(Exception):
    """A ZooKeeper operation failed."""


class ZkNoNode(ZkError):
    pass


class ZkNodeExists(ZkError):
    pass


class ZkBadVersion(ZkError):
    pass


class ZkNotEmpty(ZkError):
    pass


class ZkNoAuth(ZkError):
    """The znode's ACL does not let this session do that (zookeeper.set.acl)."""


class ZkConnectionError(ZkError):
    """No usable session: not connected, connection lost mid-call, or session expired."""


class ControllerMoved(ZkError):
    """A fenced controller write failed its /controller_epoch check: another controller won."""


class BrokerIdAlreadyRegistered(ZkError):
    """Another live session owns /brokers/ids/<id>."""


class SessionState(Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost; the session may still be alive
    LOST = "lost"  # the session expired: its ephemeral nodes and watches are gone


@dataclass(frozen=True)
class Stat:
    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    num_children: int
    data_length: int
    ctime_ms: int = 0  # the server's clock when the node was created
    mtime_ms: int = 0  # the server's clock when the data was last set
    cversion: int = 0  # changes to the node's children (one per create or delete of a child)

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


@dataclass(frozen=True)
class Node:
    path: str
    data: bytes | None
    stat: Stat


def stat_of(s: Any) -> Stat:
    return Stat(
        version=s.version,
        czxid=s.czxid,
        mzxid=s.mzxid,
        ephemeral_owner=s.ephemeralOwner,
        ctime_ms=s.ctime,
        mtime_ms=s.mtime,
        cversion=s.cversion,
        num_children=s.numChildren,
        data_length=s.dataLength,
    )


_MAPPED: tuple[tuple[type[Exception], type[ZkError]], ...] = (
    (kz_exc.NoNodeError, ZkNoNode),
    (kz_exc.NodeExistsError, ZkNodeExists),
    (kz_exc.BadVersionError, ZkBadVersion),
    (kz_exc.NotEmptyError, ZkNotEmpty),
    (kz_exc.NoAuthError, ZkNoAuth),
    (kz_exc.ConnectionClosedError, ZkConnectionError),
    (kz_exc.ConnectionLoss, ZkConnectionError),
    (kz_exc.SessionExpiredError, ZkConnectionError),
    (kz_exc.OperationTimeoutError, ZkConnectionError),
)


def mapped_error(exc: BaseException) -> ZkError:
    for kz, ours in _MAPPED:
        if isinstance(exc, kz):
            return ours(f"{type(exc).__name__}: {exc}")
    return ZkError(f"{type(exc).__name__}: {exc}")


def call_mapped(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except kz_exc.KazooException as exc:
        raise mapped_error(exc) from exc


def first_failure(results: list[Any]) -> ZkError | None:
    """The error of a failed multi: the op that failed, not the rolled-back ones."""
    errors = [r for r in results if isinstance(r, Exception)]
    real = [e for e in errors if not isinstance(e, kz_exc.RolledBackError)]
    if real:
        return mapped_error(real[0])
    return mapped_error(errors[0]) if errors else None

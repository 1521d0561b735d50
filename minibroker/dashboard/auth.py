"""The dashboard of a secure cluster: served over TLS, a login with a SCRAM user's password
(checked against its credential in ZooKeeper, never stored), a session cookie (HttpOnly,
Secure, SameSite=Strict) with its own CSRF token that every fault request must carry, and fault
actions for super users only. `--public-read` lets anyone view the page without logging in;
acting still needs a login. Beyond Kafka (which has no dashboard)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from minibroker.runtime import logging as slog

SESSION_COOKIE = "minibroker_session"
SESSION_TTL_S = 8 * 3600
MAX_SESSIONS = 1000


@dataclass
class DashboardSession:
    user: str
    csrf: str
    expires: float


@dataclass
class DashboardAuth:
    """`check_password(user, password)` blocks (ZooKeeper and PBKDF2): run off the loop."""

    check_password: Callable[[str, str], bool]
    super_users: frozenset[str]
    public_read: bool = False
    sessions: dict[str, DashboardSession] = field(default_factory=dict)

    async def login(self, user: str, password: str) -> tuple[str, DashboardSession] | None:
        ok = (
            bool(user)
            and bool(password)
            and await asyncio.to_thread(self.check_password, user, password)
        )
        slog.event("dashboard_login", logging.INFO if ok else logging.WARNING, user=user, ok=ok)
        if not ok:
            return None
        now = time.monotonic()
        for sid in [s for s, v in self.sessions.items() if v.expires < now]:
            del self.sessions[sid]
        while len(self.sessions) >= MAX_SESSIONS:
            del self.sessions[next(iter(self.sessions))]
        sid = secrets.token_urlsafe(32)
        session = DashboardSession(user, secrets.token_urlsafe(24), now + SESSION_TTL_S)
        self.sessions[sid] = session
        return sid, session

    def session_of(self, cookie: str | None) -> DashboardSession | None:
        if not cookie:
            return None
        session = self.sessions.get(cookie)
        if session is None or session.expires < time.monotonic():
            return None
        return session

    def logout(self, cookie: str | None) -> None:
        if cookie:
            self.sessions.pop(cookie, None)

    def may_act(self, session: DashboardSession | None) -> bool:
        return session is not None and f"User:{session.user}" in self.super_users

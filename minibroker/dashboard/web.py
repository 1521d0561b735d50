"""The dashboard's HTTP side (aiohttp): the static page, the state as JSON, the changes as
Server-Sent Events, each partition's LEO/HW history, and the fault buttons' endpoint.

Faults change the cluster, so `POST /api/fault` needs the token the page read from
`/api/session` (a same-origin read: another site's page can neither read it nor send the
header without a CORS preflight, which is never granted) and refuses a foreign Origin.
A secure cluster's dashboard (`auth.py`) is served over TLS and needs a login: the token is
then the session's CSRF token, and only a super user's session may run a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from minibroker.dashboard.auth import SESSION_COOKIE, DashboardAuth, DashboardSession
from minibroker.dashboard.collector import Collector, sse
from minibroker.dashboard.faults import ACTIONS, Faults
from minibroker.runtime.clock import now_ms

STATIC = Path(__file__).with_name("static")
TOKEN_HEADER = "X-Minibroker-Token"
HEARTBEAT_S = 15.0
EVENTS_ON_CONNECT = 500

COLLECTOR: web.AppKey[Collector] = web.AppKey("collector", Collector)
FAULTS: web.AppKey[Faults] = web.AppKey("faults", Faults)
TOKEN: web.AppKey[str] = web.AppKey("token", str)
HOSTS: web.AppKey[frozenset[str] | None] = web.AppKey("hosts", object)  # type: ignore[arg-type]
AUTH: web.AppKey[DashboardAuth | None] = web.AppKey("auth", object)  # type: ignore[arg-type]
OPEN_PATHS = ("/login",)


def allowed_hosts(listen_host: str) -> frozenset[str] | None:
    """The names a request's Host may give (any port) when listening on `listen_host`: the
    loopback names and the address itself; None (any) when listening on every address. A page
    of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) is then not
    the dashboard's own origin, and gets neither the token nor a fault."""
    if listen_host in ("", "0.0.0.0", "::"):
        return None
    return frozenset({"127.0.0.1", "localhost", "[::1]", listen_host})


def _host_allowed(request: web.Request) -> bool:
    allowed = request.app[HOSTS]
    if allowed is None:
        return True
    host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    return host in allowed


@web.middleware
async def require_login(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """With a login: every page and API needs a session (GETs not, with --public-read)."""
    auth = request.app[AUTH]
    if auth is None or request.path in OPEN_PATHS or request.path.startswith("/static/"):
        return await handler(request)
    session = auth.session_of(request.cookies.get(SESSION_COOKIE))
    if session is None and not (auth.public_read and request.method == "GET"):
        if request.path == "/":
            raise web.HTTPSeeOther("/login")
        return _refused(401, "log in first (/login)")
    request["session"] = session
    return await handler(request)


def make_app(
    collector: Collector,
    faults: Faults,
    hosts: frozenset[str] | None = None,
    auth: DashboardAuth | None = None,
) -> web.Application:
    app = web.Application(middlewares=[require_login])
    app[HOSTS] = hosts
    app[AUTH] = auth
    app[COLLECTOR] = collector
    app[FAULTS] = faults
    app[TOKEN] = secrets.token_urlsafe(24)
    app.router.add_get("/", index)
    app.router.add_get("/api/session", session)
    app.router.add_get("/api/state", state)
    app.router.add_get("/api/events", events)
    app.router.add_get("/api/history", history)
    app.router.add_get("/api/stream", stream)
    app.router.add_post("/api/fault", fault)
    app.router.add_get("/login", login_page)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_static("/static/", STATIC, append_version=True)
    return app


async def index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def session(request: web.Request) -> web.Response:
    if not _host_allowed(request):
        return _refused(403, f"not the dashboard's own address: {request.host}")
    faults = request.app[FAULTS]
    auth, current = request.app[AUTH], _session(request)
    token = request.app[TOKEN] if auth is None else (current.csrf if current else "")
    return web.json_response(
        {
            "token": token,
            "user": current.user if current else None,
            "may_act": auth is None or auth.may_act(current),
            "faults": faults.mode,
            "faults_hint": faults.hint,
            "actions": list(ACTIONS),
            "zookeeper": request.app[COLLECTOR].zk_connect,
        }
    )


async def state(request: web.Request) -> web.Response:
    return web.json_response(request.app[COLLECTOR].state)


def _events_of(collector: Collector, key: str | None) -> list[dict[str, Any]]:
    return [e for e in collector.events if key is None or e.get("tp") == key]


async def events(request: web.Request) -> web.Response:
    """The kept events, oldest first; `?tp=TOPIC-P` only that partition's."""
    return web.json_response(_events_of(request.app[COLLECTOR], request.query.get("tp")))


async def history(request: web.Request) -> web.Response:
    key = request.query.get("tp", "")
    samples = request.app[COLLECTOR].history.of(key, now_ms())
    return web.json_response({"tp": key, "samples": samples})


async def stream(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: the whole state and the kept events first, then every change."""
    collector = request.app[COLLECTOR]
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await resp.prepare(request)
    q = collector.subscribe()
    try:
        recent = list(collector.events)[-EVENTS_ON_CONNECT:]
        await resp.write(sse({"type": "state", "state": collector.state, "events": recent}))
        while True:
            try:
                async with asyncio.timeout(HEARTBEAT_S):
                    message = await q.get()
            except TimeoutError:
                await resp.write(b": keepalive\n\n")
                continue
            if message is None:
                break
            await resp.write(message)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        collector.unsubscribe(q)
    with contextlib.suppress(ConnectionResetError):
        await resp.write_eof()
    return resp


async def fault(request: web.Request) -> web.Response:
    if not _host_allowed(request):
        return _refused(403, f"not the dashboard's own address: {request.host}")
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        return _refused(
            403, f"faults are accepted only from the dashboard's own page, not {origin}"
        )
    auth, current = request.app[AUTH], _session(request)
    if auth is not None and not auth.may_act(current):
        return _refused(403, "faults need a super user's login")
    expected = request.app[TOKEN] if current is None else current.csrf
    if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), expected):
        return _refused(403, "missing or wrong token: reload the dashboard page")
    try:
        body = await request.json()
        action, target = str(body["action"]), str(body.get("target", ""))
    except (ValueError, KeyError, TypeError):
        return _refused(400, 'expected JSON {"action": ..., "target": ...}')
    result = await request.app[FAULTS].run(action, target)
    return web.json_response(
        {"ok": result.ok, "message": result.message}, status=200 if result.ok else 409
    )


def _session(request: web.Request) -> DashboardSession | None:
    got = request.get("session")
    return got if isinstance(got, DashboardSession) else None


async def login_page(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "login.html", headers={"Cache-Control": "no-cache"})


async def login(request: web.Request) -> web.Response:
    auth = request.app[AUTH]
    if auth is None:
        raise web.HTTPSeeOther("/")
    form = await request.post()
    got = await auth.login(str(form.get("username", "")), str(form.get("password", "")))
    if got is None:
        raise web.HTTPSeeOther("/login?failed=1")
    sid, _session = got
    response = web.HTTPSeeOther("/")
    response.set_cookie(
        SESSION_COOKIE, sid, httponly=True, secure=True, samesite="Strict", path="/"
    )
    raise response


async def logout(request: web.Request) -> web.Response:
    auth = request.app[AUTH]
    if auth is not None:
        auth.logout(request.cookies.get(SESSION_COOKIE))
    response = web.HTTPSeeOther("/login")
    response.del_cookie(SESSION_COOKIE, path="/")
    raise response


def _refused(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "message": message}, status=status)


async def serve(
    collector: Collector,
    faults: Faults,
    host: str,
    port: int,
    auth: DashboardAuth | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> web.AppRunner:
    """Start the collector and listen on host:port; the runner to clean up with."""
    await collector.start()
    app = make_app(collector, faults, allowed_hosts(host), auth)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    return runner


async def serve_until_stopped(
    collector: Collector,
    faults: Faults,
    host: str,
    port: int,
    stop: asyncio.Event,
    auth: DashboardAuth | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Serve until `stop` is set, then close the page streams and the collector."""
    runner = await serve(collector, faults, host, port, auth, ssl_context)
    try:
        await stop.wait()
    finally:
        await collector.close()
        await runner.cleanup()

"""The dashboard benchmark's page and server: `minibroker dashboard` as a process of its own, and
a page open on it that records when each partition row showed which ISR (wall-clock ms, the
same clock ZooKeeper stamps its mtimes with on this machine). The page is headless Debian
chromium when it is installed (what a user has open, its CPU included), else a Server-Sent
Events reader that records when each change arrived."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from bench.common import free_ports, spawn, stop
from minibroker.runtime.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Installed in the page: every row whose ISR changed (or that the table gained) is noted with
# its ISR and the time, in window.__seen, read and emptied by `seen()`.
OBSERVER_JS = """
window.__seen = [];
new MutationObserver((mutations) => {
  const t = Date.now();
  for (const m of mutations) {
    const rows = m.type === 'attributes' ? [m.target] : [...m.addedNodes];
    for (const n of rows)
      if (n.dataset && n.dataset.key) window.__seen.push([n.dataset.key, n.dataset.isr, t]);
  }
}).observe(document.querySelector('#partitions tbody'),
           {childList: true, subtree: true, attributes: true, attributeFilter: ['data-isr']});
"""


class Page(Protocol):
    kind: str

    def rows(self) -> int: ...

    def seen(self) -> list[tuple[str, str, int]]:
        """(partition key, ISR as "1,2,3", wall ms) of every row shown since the last call."""
        ...

    def pids(self) -> list[int]: ...

    def close(self) -> None: ...


class BrowserPage:
    kind = "headless chromium"

    def __init__(self, url: str) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1600,1000", "--disable-background-networking"):  # fmt: skip
            options.add_argument(arg)
        self.service = Service(CHROMEDRIVER)
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.driver.get(url)
        wait_until(
            lambda: self.driver.execute_script("return !!document.querySelector('#partitions')"),
            timeout_s=30,
            what="the page",
        )
        self.driver.execute_script(OBSERVER_JS)

    def rows(self) -> int:
        n: int = self.driver.execute_script(
            "return document.querySelectorAll('#partitions tr[data-key]').length"
        )
        return n

    def seen(self) -> list[tuple[str, str, int]]:
        got: list[list[Any]] = self.driver.execute_script(
            "const s = window.__seen; window.__seen = []; return s;"
        )
        return [(str(k), str(isr), int(t)) for k, isr, t in got]

    def pids(self) -> list[int]:
        """chromedriver and every process under it (the browser, its renderer, its helpers)."""
        root = self.service.process.pid
        return [root, *descendants(root)]

    def close(self) -> None:
        self.driver.quit()


class StreamReader:
    """/api/stream read on a thread, as a page would: the state, then every patch."""

    kind = "Server-Sent Events reader (no chromium here)"

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=None)
        self.conn.request("GET", "/api/stream")
        self.resp = self.conn.getresponse()
        self._rows: dict[str, str] = {}
        self._seen: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError, http.client.HTTPException):
            for line in self.resp:
                if not line.startswith(b"data: "):
                    continue
                msg = json.loads(line[6:])
                t = int(time.time() * 1000)
                parts = msg.get("state", msg.get("full", {})).get("partitions")
                parts = parts if parts is not None else msg.get("partitions", [])
                with self._lock:
                    for p in parts:
                        isr = ",".join(str(b) for b in sorted(p["isr"]))
                        self._rows[p["key"]] = isr
                        self._seen.append((p["key"], isr, t))

    def rows(self) -> int:
        with self._lock:
            return len(self._rows)

    def seen(self) -> list[tuple[str, str, int]]:
        with self._lock:
            out, self._seen = self._seen, []
        return out

    def pids(self) -> list[int]:
        return []

    def close(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(2)  # the reader's blocking read ends
        self.conn.close()


def open_page(url: str) -> Page:
    have_browser = shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)
    try:
        if have_browser:
            return BrowserPage(url)
    except ImportError:
        pass
    return StreamReader(url)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@contextlib.contextmanager
def dashboard_process(cluster_dir: str, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`minibroker dashboard --dir CLUSTER_DIR` on a free port, once it answers."""
    (port,) = free_ports(1)
    with log.open("wb") as out:
        proc = spawn(
            [sys.executable, "-m", "minibroker.cli.main", "dashboard", "--dir", cluster_dir,
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the dashboard exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/api/session") as r:
                return bool(r.status == 200)
            return False

        wait_until(answers, timeout_s=30, what="the dashboard")
        yield proc, url
    finally:
        stop(proc)

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
import threading
import time
from pathlib import Path
from typing import Protocol

from minibroker.dashboard import probe
from minibroker.runtime.waiting import wait_until


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
        self.driver = probe.headless_chromium()
        self.driver.get(url)
        wait_until(
            lambda: self.driver.execute_script("return !!document.querySelector('#partitions')"),
            timeout_s=30,
            what="the page",
        )
        self.driver.execute_script(probe.ISR_WATCH_JS)

    def rows(self) -> int:
        n: int = self.driver.execute_script(
            "return document.querySelectorAll('#partitions tr[data-key]').length"
        )
        return n

    def seen(self) -> list[tuple[str, str, int]]:
        return probe.seen(self.driver)

    def pids(self) -> list[int]:
        """chromedriver and every process under it (the browser, its renderer, its helpers)."""
        root = self.driver.service.process.pid
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
    have_browser = shutil.which(probe.CHROMIUM) and shutil.which(probe.CHROMEDRIVER)
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


def dashboard_process(
    cluster_dir: str, log: Path
) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[bytes], str]]:
    """`minibroker dashboard --dir CLUSTER_DIR` on a free port, once it answers."""
    return probe.running_dashboard("--dir", cluster_dir, log=log)

"""A real browser for the dashboard's tests: Debian's chromium driven by selenium through
Debian's chromedriver (nothing is downloaded), headless; and the dashboard as a process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.localcluster import free_ports
from minibroker.runtime.waiting import wait_until

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


def browser_or_skip() -> Any:
    """A headless chromium; without one the tests skip, unless CI=true (then they fail)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        reason = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1600,1000", "--disable-background-networking"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@contextlib.contextmanager
def dashboard(*args: str, log: Path) -> Iterator[str]:
    """`minibroker dashboard ARGS` on a free port; its base URL once it answers."""
    (port,) = free_ports(1)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "minibroker.cli.main", "dashboard", *args, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the dashboard exited: {log.read_text()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/api/session", timeout=2) as r,
            ):
                return bool(r.status == 200)
            return False

        wait_until(answers, timeout_s=20, what="the dashboard to answer")
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


class Page:
    def __init__(self, driver: Any, url: str, shots: Path) -> None:
        self.driver, self.url, self.shots = driver, url, shots

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every partition row's data- attributes and replica cells, read in one script."""
        got: dict[str, dict[str, Any]] = self.driver.execute_script(
            """
            const out = {};
            for (const tr of document.querySelectorAll('#partitions tr[data-topic]')) {
              const cells = {};
              for (const td of tr.querySelectorAll('[data-broker]'))
                cells[td.dataset.broker] = {leo: td.dataset.leo, hw: td.dataset.hw};
              out[tr.dataset.topic + '-' + tr.dataset.partition] = {
                leader: tr.dataset.leader, isr: tr.dataset.isr,
                epoch: tr.dataset.leaderEpoch, cells};
            }
            return out;
            """
        )
        return got

    def event_names(self) -> list[str]:
        names: list[str] = self.driver.execute_script(
            "return [...document.querySelectorAll('#events tr[data-event]')]"
            ".map(tr => tr.dataset.event)"
        )
        return names

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"dashboard-{name}.png"))

    def watch_isrs(self) -> None:
        """From now on, note every partition row's ISR changes (see `seen`)."""
        self.driver.execute_script(OBSERVER_JS)

    def seen(self) -> list[tuple[str, str, int]]:
        """(partition key, ISR "1,2,3", page ms) of each row change since the last call."""
        got = self.driver.execute_script("const s = window.__seen; window.__seen = []; return s;")
        return [(str(k), str(isr), int(t)) for k, isr, t in got]


def screenshots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$MINIBROKER_SCREENSHOTS (docs/ when refreshing the README's pictures), else a tmp dir."""
    shots = Path(os.environ.get("MINIBROKER_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


# Installed in a page: every partition row whose ISR changed (or that the table gained) is
# noted with its ISR and the time (the page's clock), read and emptied by Page.seen().
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

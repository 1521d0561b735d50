"""A real browser for the dashboard's tests: Debian's chromium driven by selenium through
Debian's chromedriver (nothing is downloaded), headless; and the dashboard as a process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.dashboard import probe
from minibroker.runtime.waiting import wait_until

# selenium imported now, at collection, in the main thread: imported lazily inside a test it
# once raced another thread's import (a module-scoped cluster's ZooKeeper session runs
# threads) and CPython 3.11's module lock failed with a KeyError (a CI rehearsal, 2026-11-28).
with contextlib.suppress(ImportError):
    import selenium.webdriver.chrome.service  # noqa: F401


def browser_or_skip(accept_insecure_certs: bool = False) -> Any:
    """A headless chromium; without one the tests skip, unless CI=true (then they fail)."""
    missing = [p for p in (probe.CHROMIUM, probe.CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        reason = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    return probe.headless_chromium(accept_insecure_certs)


console_errors = probe.console_errors


@contextlib.contextmanager
def dashboard(*args: str, log: Path) -> Iterator[str]:
    """`minibroker dashboard ARGS` on a free port; its base URL once it answers."""
    with probe.running_dashboard(*args, log=log) as (_proc, url):
        yield url


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


class Page:
    def __init__(self, driver: Any, url: str, shots: Path) -> None:
        self.driver, self.url, self.shots = driver, url, shots

    def click(self, css: str, *, timeout_s: float = 5.0) -> None:
        """Click the element CSS selects, found afresh on each try: the page re-renders its
        tables every refresh, so an element found a moment ago may be gone (stale)."""
        from selenium.common.exceptions import (
            ElementClickInterceptedException,
            NoSuchElementException,
            StaleElementReferenceException,
        )
        from selenium.webdriver.common.by import By

        def clicked() -> bool:
            try:
                self.driver.find_element(By.CSS_SELECTOR, css).click()
            except (
                StaleElementReferenceException,
                NoSuchElementException,
                ElementClickInterceptedException,
            ):
                return False
            return True

        wait_until(clicked, timeout_s=timeout_s, interval_s=0.05, what=f"a click on {css}")

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

    def replicas(self, key: str) -> dict[str, dict[str, str]]:
        """One partition row's replica cells: each broker's data- attributes and its text."""
        got: dict[str, dict[str, str]] = self.driver.execute_script(
            """
            const out = {};
            const tr = document.querySelector(`#partitions tr[data-key='${arguments[0]}']`);
            if (!tr) return out;
            out.row = {reassigning: tr.dataset.reassigning, throttled: tr.dataset.throttled,
                       replicas: tr.children[3].textContent};
            for (const td of tr.querySelectorAll('[data-broker]'))
              out[td.dataset.broker] = {...td.dataset, text: td.textContent};
            return out;
            """,
            key,
        )
        return got

    def throttles(self) -> dict[str, str]:
        """The broker table's replication-throttle cell of each broker."""
        got: dict[str, str] = self.driver.execute_script(
            "const out = {};"
            "for (const tr of document.querySelectorAll('#brokers tr[data-broker-id]'))"
            "  out[tr.dataset.brokerId] = tr.querySelector('[data-throttle]').textContent;"
            "return out;"
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
        self.driver.execute_script(probe.ISR_WATCH_JS)

    def seen(self) -> list[tuple[str, str, int]]:
        """(partition key, ISR "1,2,3", page ms) of each row change since the last call."""
        return probe.seen(self.driver)


def screenshots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$MINIBROKER_SCREENSHOTS (docs/ when refreshing the README's pictures), else a tmp dir."""
    shots = Path(os.environ.get("MINIBROKER_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    return shots

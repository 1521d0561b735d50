"""For scripts and tests that drive the dashboard's page in a real browser (the benchmarks and
tests/browser): Debian's headless chromium through Debian's chromedriver (selenium, imported
only here and only when called: nothing is downloaded), and a hook that notes when each
partition row showed which ISR (the page's contract: rows carry data-key and data-isr)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from minibroker.localcluster import free_ports
from minibroker.runtime.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Installed in a page: every partition row whose ISR changed (or that the table gained) is noted
# as [key, ISR "1,2,3", the page's Date.now()] in window.__seen; DRAIN_JS reads and empties it.
ISR_WATCH_JS = """
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
DRAIN_JS = "const s = window.__seen || []; window.__seen = []; return s;"


def headless_chromium(accept_insecure_certs: bool = False) -> Any:
    """A selenium driver of headless chromium, with the browser's console kept (for
    `console_errors`). ImportError without selenium; WebDriverException without chromium.

    Chromium and chromedriver make their profile and singleton-socket dirs under TMPDIR and
    leave some behind when the browser is ended: they get a scratch TMPDIR of their own, which
    the driver's `quit()` removes."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1600,1000", "--disable-background-networking"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # A secure cluster's dashboard has a certificate of the cluster's own CA, which this
    # browser profile does not know (the tests check the chain separately).
    options.set_capability("acceptInsecureCerts", accept_insecure_certs)
    scratch = tempfile.mkdtemp(prefix="minibroker-chromium-")
    try:
        driver = webdriver.Chrome(
            service=Service(CHROMEDRIVER, env={**os.environ, "TMPDIR": scratch}), options=options
        )
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    end_browser = driver.quit

    def quit_and_clean() -> None:
        try:
            end_browser()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    driver.quit = quit_and_clean  # type: ignore[method-assign]
    return driver


def seen(driver: Any) -> list[tuple[str, str, int]]:
    """(partition key, ISR, page ms) of each row change noted since the last call."""
    got = driver.execute_script(DRAIN_JS)
    return [(str(k), str(isr), int(t)) for k, isr, t in got]


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@contextlib.contextmanager
def running_dashboard(*args: str, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`minibroker dashboard ARGS` as a process on a free loopback port, logging to `log`: the
    process and its base URL once it answers; stopped (SIGTERM, then SIGKILL) on the way out."""
    (port,) = free_ports(1)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "minibroker.cli.main", "dashboard", *args, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the dashboard exited: {log.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/api/session", timeout=2) as r,
            ):
                return bool(r.status == 200)
            return False

        wait_until(answers, timeout_s=30, what="the dashboard to answer")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

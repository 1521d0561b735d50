"""The dashboard of a `cluster up --secure --dashboard` cluster in a real browser (issue 28):
HTTPS with a certificate of the cluster's CA, a login page, the page after logging in, fault
requests refused without the session's CSRF token and for a user who is not a super user."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.localcluster import free_ports
from minibroker.runtime.waiting import wait_until
from tests.browser.browser import browser_or_skip
from tests.integration.conftest import Cluster, cluster_with_zk

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    d = tmp_path_factory.mktemp("dash-secure") / "cluster"
    (port,) = free_ports(1)
    with cluster_with_zk(d, "--brokers", "1", "--controllers", "1", "--secure",
                         "--dashboard", str(port)) as c:  # fmt: skip
        c.cli("users", "add", "viewer", "--password", "viewer-pw")
        url = f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(d / "security" / "ca.pem"))

        def answers() -> bool:
            try:
                urllib.request.urlopen(f"{url}/login", timeout=2, context=context).close()
            except OSError:
                return False
            return True

        wait_until(answers, timeout_s=30, what="the secure dashboard")
        yield c, url


def admin_password(c: Cluster) -> str:
    for line in (c.dir / "admin.properties").read_text().splitlines():
        if line.startswith("sasl.password="):
            return line.split("=", 1)[1]
    raise AssertionError("no sasl.password in admin.properties")


def test_https_with_the_cluster_ca_and_no_state_before_login(sc: tuple[Cluster, str]) -> None:
    c, url = sc
    context = ssl.create_default_context(cafile=str(c.dir / "security" / "ca.pem"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/api/state", timeout=5, context=context)
    assert refused.value.code == 401
    with pytest.raises(urllib.error.URLError):  # a client that does not trust the CA
        urllib.request.urlopen(f"{url}/login", timeout=5, context=ssl.create_default_context())


def login(driver: Any, url: str, user: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    wait_until(lambda: "/login" in driver.current_url, timeout_s=10, what="the login page")
    driver.find_element(By.ID, "username").send_keys(user)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login").click()


def post_fault(driver: Any, token: str | None) -> dict[str, Any]:
    """A fault request from the page itself (same origin, the session cookie), with `token`."""
    got: dict[str, Any] = driver.execute_async_script(
        """
        const [token, done] = arguments;
        const headers = {"Content-Type": "application/json"};
        if (token !== null) headers["X-Minibroker-Token"] = token;
        fetch("/api/fault", {method: "POST", headers,
                             body: JSON.stringify({action: "elect-preferred", target: ""})})
          .then(async r => done({status: r.status, body: await r.json()}));
        """,
        token,
    )
    return got


def session_of(driver: Any) -> dict[str, Any]:
    got: dict[str, Any] = driver.execute_async_script(
        "const done = arguments[0]; fetch('/api/session').then(r => r.json()).then(done);"
    )
    return got


def test_the_admin_logs_in_sees_the_cluster_and_acts_only_with_the_token(
    sc: tuple[Cluster, str],
) -> None:
    c, url = sc
    driver = browser_or_skip(accept_insecure_certs=True)
    try:
        driver.set_script_timeout(10)
        login(driver, url, "admin", admin_password(c))
        wait_until(lambda: driver.current_url.rstrip("/") == url, timeout_s=10, what="the page")
        session = session_of(driver)
        assert session["user"] == "admin" and session["may_act"] and session["token"]
        state: dict[str, Any] = driver.execute_async_script(
            "const done = arguments[0]; fetch('/api/state').then(r => r.json()).then(done);"
        )
        assert json.dumps(state)  # the cluster's state, now readable
        assert post_fault(driver, None)["status"] == 403
        assert post_fault(driver, "forged")["status"] == 403
        answered = post_fault(driver, session["token"])
        assert answered["status"] in (200, 409), answered  # run (409: nothing to elect)
        cookie = driver.get_cookie("minibroker_session")
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    finally:
        driver.quit()


def test_a_wrong_password_stays_on_the_login_page_and_a_viewer_cannot_act(
    sc: tuple[Cluster, str],
) -> None:
    c, url = sc
    driver = browser_or_skip(accept_insecure_certs=True)
    try:
        driver.set_script_timeout(10)
        login(driver, url, "admin", "wrong")
        wait_until(lambda: "failed=1" in driver.current_url, timeout_s=10, what="a refusal")
        login(driver, url, "viewer", "viewer-pw")
        wait_until(lambda: driver.current_url.rstrip("/") == url, timeout_s=10, what="the page")
        session = session_of(driver)
        assert session["user"] == "viewer" and not session["may_act"]
        refused = post_fault(driver, session["token"])
        assert refused["status"] == 403 and "super user" in refused["body"]["message"]
    finally:
        driver.quit()
    # The failed login is a warning in the dashboard's log.
    assert "dashboard_login" in Path(c.state.process("dashboard").log_file).read_text()

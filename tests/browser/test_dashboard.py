"""The live dashboard in a real browser (headless chromium) against a real process-mode
cluster: the page matches `topics describe --json`, follows a paused follower out of the ISR
and back without a reload, kills a leader through its fault button and shows the new leader
and epoch; the fault endpoint refuses requests without the page's token.

Screenshots of the states go to $MINIBROKER_SCREENSHOTS (docs/ when refreshing them) or to
the test's tmp dir."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.browser.browser import (
    Page,
    browser_or_skip,
    console_errors,
    dashboard,
    get_json,
    screenshots_dir,
)
from tests.integration.conftest import Cluster, running_cluster
from tests.walkthrough import Load

pytestmark = [pytest.mark.integration, pytest.mark.browser]

TOPIC = "demo"
LAG_MS = 3000  # the demo profile's replica.lag.time.max.ms
TXN_MAX, TXN_MAX_MS = "transaction.max.timeout.ms", 10_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("dash") / "cluster"
    # The demo profile: a 3 s replica lag and a 6 s session, so a paused follower leaves the
    # ISR by its leader's shrink, before its session expires. Follower fetches of at most 16 KiB
    # a partition: a throttled new replica is then held back after its first fetch.
    # Transactions may stay open 10 s at most here: a hanging one is marked 10 s after its
    # producer's last write.
    with running_cluster(
        d, "--set", "replica.fetch.max.bytes=16384", "--set", f"{TXN_MAX}={TXN_MAX_MS}"
    ) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            c = Cluster(d, state, zk)
            c.cli("topics", "create", TOPIC, "--partitions", "3", "--replication-factor", "3",
                  "--config", "min.insync.replicas=2", "--wait")  # fmt: skip
            subprocess.run(
                [sys.executable, "-m", "minibroker.cli.main", "produce", TOPIC, "--acks", "all",
                 "--dir", str(d)],
                input="".join(f"record {i}\n" for i in range(30)),
                text=True, check=True, capture_output=True, timeout=60,
            )  # fmt: skip
            yield c
        finally:
            zk.stop()


@pytest.fixture(scope="module")
def page(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    shots = screenshots_dir(tmp_path_factory)
    driver = browser_or_skip()
    log = cluster.dir.parent / "dashboard.log"
    try:
        with dashboard("--dir", str(cluster.dir), log=log) as url:
            driver.get(url)
            yield Page(driver, url, shots)
    finally:
        driver.quit()


def describe(c: Cluster) -> dict[str, dict[str, Any]]:
    return {
        f"{p['topic']}-{p['partition']}": p
        for p in json.loads(c.cli("topics", "describe", TOPIC, "--json").stdout)
    }


def as_page(p: dict[str, Any]) -> dict[str, Any]:
    """What the row of describe's partition `p` must say."""
    return {
        "leader": str(p["leader"]),
        "isr": ",".join(str(b) for b in sorted(p["isr"])),
        "epoch": str(p["leader_epoch"]),
        "cells": {
            str(r["broker"]): {"leo": str(r["log_end_offset"]), "hw": str(r["high_watermark"])}
            for r in p["replicas_state"]
        },
    }


def test_the_page_loads_clean_and_its_rows_match_topics_describe(
    cluster: Cluster, page: Page
) -> None:
    want = {k: as_page(p) for k, p in describe(cluster).items()}
    wait_until(lambda: page.rows() == want, timeout_s=15, what=f"rows {page.rows()} == {want}")
    assert console_errors(page.driver) == []
    state = get_json(f"{page.url}/api/state")
    assert {p["key"] for p in state["partitions"]} == set(want)
    page.shot("cluster")


def test_a_paused_follower_leaves_the_isr_and_comes_back_without_a_reload(
    cluster: Cluster, page: Page
) -> None:
    key = f"{TOPIC}-0"
    leader = int(page.rows()[key]["leader"])
    follower = next(b for b in (1, 2, 3) if b != leader)
    without = ",".join(str(b) for b in (1, 2, 3) if b != follower)
    page.driver.execute_script(
        "document.querySelector(`#partitions tr[data-key='demo-0']`).click()"
    )
    # A leader drops a follower only when it has data the follower lacks (Kafka 2.5+: a replica
    # at the leader's LEO is in sync however long ago it fetched): records keep coming.
    load = Load([p.address for p in cluster.state.by_role("broker")])
    try:
        wait_until(lambda: len(load.acked) >= 10, timeout_s=30, what="the first acks")
        cluster.cli("cluster", "pause", f"broker-{follower}")
        try:
            wait_until(
                lambda: page.rows()[key]["isr"] == without and "isr_shrink" in page.event_names(),
                # The leader's check runs every LAG_MS / 2: it drops the follower 1 to 1.5 LAG_MS
                # after its last fetch; the rest is ZooKeeper, the dashboard and the page, on a
                # machine that may be busy (a deadline, not a figure).
                timeout_s=1.5 * LAG_MS / 1000 + 8,
                what=f"broker {follower} out of {key}'s ISR and an isr_shrink row",
            )
            page.shot("follower-paused")
        finally:
            cluster.cli("cluster", "resume", f"broker-{follower}")
        wait_until(
            lambda: page.rows()[key]["isr"] == "1,2,3" and "isr_expand" in page.event_names(),
            timeout_s=30,
            what=f"broker {follower} back in {key}'s ISR",
        )
    finally:
        load.stop()
    assert load.acked, "the load got no acknowledgement"
    assert console_errors(page.driver) == []


def test_delete_records_shows_every_replicas_log_start_offset(cluster: Cluster, page: Page) -> None:
    """Issue 27: each replica's log start offset beside its LEO once DeleteRecords moved it
    (the leader's at once, the followers' from their next fetch), and the event."""
    key = f"{TOPIC}-0"
    cluster.cli("topics", "delete-records", TOPIC, "--partition", "0", "--offset", "-1")
    hw = int(describe(cluster)[key]["replicas_state"][0]["high_watermark"])
    assert hw > 0

    def shown() -> bool:
        cells = [c for b, c in page.replicas(key).items() if b != "row"]
        return len(cells) == 3 and all(
            c["logStart"] == str(hw) and c["text"].split(": ", 1)[1].startswith(f"{hw}…")
            for c in cells
        )

    wait_until(shown, timeout_s=15, what=f"every replica of {key} to show log start {hw}")
    wait_until(lambda: "records_deleted" in page.event_names(), timeout_s=10,
               what="the records_deleted event in the timeline")  # fmt: skip
    page.shot("log-start-offset")


def test_a_fault_button_kills_the_leader_and_the_page_shows_the_new_one(
    cluster: Cluster, page: Page
) -> None:
    from selenium.webdriver.common.by import By

    key = f"{TOPIC}-1"
    before = page.rows()[key]
    leader = before["leader"]
    d = page.driver
    page.click(f"button[data-action=kill][data-target=broker-{leader}]")
    wait_until(lambda: d.find_element(By.ID, "confirm").is_displayed(), timeout_s=5, what="dialog")
    page.click("#confirm-yes")
    wait_until(
        lambda: (
            page.rows()[key]["leader"] not in (leader, "-1")
            and int(page.rows()[key]["epoch"]) > int(before["epoch"])
            and "leader_elected" in page.event_names()
        ),
        timeout_s=20,
        what=f"a new leader of {key} (was {leader}, epoch {before['epoch']}) and its event",
    )
    toast = d.find_element(By.ID, "toast")
    # textContent, not .text: the toast hides itself after 8 s, and a hidden element's .text
    # is empty.
    said = toast.get_attribute("textContent")
    assert toast.get_attribute("data-ok") == "true" and f"kill: broker-{leader}" in said, said
    page.shot("leader-killed")
    # The same button again: the node is down, so the answer is a message, not a trace.
    r = post(page, {"action": "kill", "target": f"broker-{leader}"}, token=token(page))
    assert (
        r[0] == 409 and "Traceback" not in r[1]["message"] and f"broker-{leader}" in r[1]["message"]
    )
    # A replica whose broker is down says so, and since when: no lag, no "last caught up".
    cells = page.replicas(key)
    assert cells[leader]["live"] == "false" and "down since" in cells[leader]["text"], cells
    cluster.cli("cluster", "start", f"broker-{leader}")
    assert console_errors(d) == []


def test_a_throttled_reassignment_shows_the_new_replica_catching_up_outside_the_isr(
    cluster: Cluster, page: Page, tmp_path: Path
) -> None:
    """Issue 26: the dashboard shows a move as it happens: the adding and removing replicas
    marked, the new replica's LEO climbing while it is outside the ISR, its entry into the
    ISR, and the throttle in force."""
    key = "moving-0"
    cluster.cli("topics", "create", "moving", "--replica-assignment", "1:2", "--wait")
    subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", "produce", "moving", "--acks", "all",
         "--dir", str(cluster.dir)],
        input="".join(f"record {i:06d} {'x' * 80}\n" for i in range(2000)),
        text=True, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [3, 2]}]}))  # fmt: skip
    # 20 kB/s against ~180 kB: the new replica takes a few seconds, fetch after fetch.
    cluster.cli("topics", "reassign", "--execute", "--reassignment-json-file", str(plan),
                "--throttle", "20000")  # fmt: skip
    row = f"#partitions tr[data-key='{key}']"
    page.driver.execute_script(f"document.querySelector(`{row}`).click()")
    leos: list[int] = []

    def climbing() -> bool:
        cells = page.replicas(key)
        new = cells.get("3", {})
        if cells.get("row", {}).get("reassigning") != "true" or new.get("inIsr") != "false":
            return False
        if new.get("adding") != "true" or cells.get("1", {}).get("removing") != "true":
            return False
        leo = int(new["leo"]) if new.get("leo") else 0
        if not leos or leo > leos[-1]:
            leos.append(leo)
        return len(leos) >= 3  # the new replica's LEO grew twice while outside the ISR

    wait_until(climbing, timeout_s=30, what=f"broker 3's LEO climbing outside {key}'s ISR")
    assert any(text != "-" for text in page.throttles().values()), page.throttles()
    page.shot("reassignment-throttled")
    wait_until(
        lambda: page.replicas(key).get("3", {}).get("inIsr") == "true",
        timeout_s=60,
        what="broker 3 in the ISR",
    )
    wait_until(
        lambda: (
            page.rows()[key]["isr"] in ("2,3",) and "reassignment_completed" in page.event_names()
        ),
        timeout_s=30,
        what="the move complete on the page",
    )
    cluster.cli("topics", "reassign", "--verify", "--reassignment-json-file", str(plan))
    assert console_errors(page.driver) == []


def token(page: Page) -> str:
    return str(get_json(f"{page.url}/api/session")["token"])


def post(
    page: Page,
    body: dict[str, str],
    *,
    token: str = "",
    origin: str | None = None,
    host: str | None = None,
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "X-Minibroker-Token": token}
    if origin is not None:
        headers["Origin"] = origin
    if host is not None:
        headers["Host"] = host
    req = urllib.request.Request(
        f"{page.url}/api/fault", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_fault_endpoint_needs_the_pages_token_and_origin(page: Page) -> None:
    body = {"action": "kill", "target": "broker-1"}
    assert post(page, body)[0] == 403
    assert post(page, body, token="guess")[0] == 403
    assert post(page, body, token=token(page), origin="http://evil.example")[0] == 403
    # DNS rebinding: another site's name resolved to 127.0.0.1 gets neither token nor fault.
    port = page.url.rsplit(":", 1)[1]
    rebound = f"evil.example:{port}"
    assert post(page, body, token=token(page), origin=f"http://{rebound}", host=rebound)[0] == 403
    request = urllib.request.Request(f"{page.url}/api/session", headers={"Host": rebound})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{page.url}/api/fault", timeout=5)  # GET
    assert err.value.code == 405
    status, answer = post(page, {"action": "explode", "target": "broker-1"}, token=token(page))
    assert status == 409 and "unknown fault" in answer["message"]


def test_an_unreachable_zookeeper_is_a_banner_and_the_page_keeps_trying(
    tmp_path: Path,
) -> None:
    from minibroker.localcluster import free_ports

    (port,) = free_ports(1)
    driver = browser_or_skip()
    try:
        with dashboard("--zk", f"127.0.0.1:{port}", log=tmp_path / "dash.log") as url:
            driver.get(url)
            wait_until(
                lambda: (
                    "is unreachable"
                    in driver.execute_script(
                        "return document.getElementById('banners').textContent"
                    )
                ),
                timeout_s=20,
                what="the ZooKeeper banner",
            )
            assert console_errors(driver) == []
    finally:
        driver.quit()


def test_an_open_transaction_shows_on_its_row_with_the_lso(cluster: Cluster, page: Page) -> None:
    """Issue 29: a partition whose LSO a transaction holds says so on its row (the leader's
    last stable offset and its open transactions), and stops saying it once it commits."""
    from confluent_kafka import Producer

    from tests.integration.kafka_wire import kafka_bootstrap

    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "transactional.id": "dash",
         "transaction.timeout.ms": TXN_MAX_MS}
    )  # fmt: skip
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, b"in an open transaction", partition=1)
    producer.flush(60)
    lso = describe(cluster)[f"{TOPIC}-1"]["last_stable_offset"]

    def row() -> list[str] | None:
        got = page.driver.execute_script(
            "const tr = document.querySelector(`#partitions tr[data-key='demo-1']`);"
            "return tr ? [tr.dataset.openTxns, tr.dataset.lso, tr.textContent] : null;"
        )
        return None if got is None else [str(v) for v in got]

    def open_row() -> list[str] | None:
        r = row()
        return r if r is not None and r[0] == "1" else None

    shown = wait_until(open_row, timeout_s=20, what="the open transaction on demo-1's row")
    assert shown[1] == str(lso) and f"1 open txn, LSO {lso}" in shown[2], shown
    assert f"(LSO {lso})" in shown[2], shown  # next to the leader's HW
    page.shot("open-transaction")
    producer.commit_transaction(60)
    wait_until(lambda: (r := row()) is not None and r[0] == "0" and "open txn" not in r[2],
               timeout_s=20, what="the row without an open transaction")  # fmt: skip


def test_a_hanging_transaction_is_marked_on_its_row(cluster: Cluster, page: Page) -> None:
    """Issue 41 §4: a transactional produce delayed past its transaction's abort opens a
    transaction nothing ends (minibroker.txn_delay's own producer holds it); once its producer
    has been quiet there for longer than transaction.max.timeout.ms the row says HANGING."""
    from minibroker.history.recorder import HistoryRecorder
    from minibroker.txn_delay.producer import OwnTransactionalProducer
    from tests.integration.kafka_wire import kafka_bootstrap

    own = OwnTransactionalProducer(
        kafka_bootstrap(cluster), "dash-hanging", HistoryRecorder(), 5000
    )
    try:
        own.init()
        own.begin()
        own.add_partitions(TOPIC, [2])
        own.produce(TOPIC, 2, b"before the abort")
        held = own.prepare(TOPIC, 2, b"delayed past the abort")
        own.end(commit=False)
        wait_until(lambda: describe(cluster)[f"{TOPIC}-2"]["open_transactions"] == [],
                   timeout_s=20, what="the abort's marker on demo-2")  # fmt: skip
        assert own.deliver(held) == "NONE"
    finally:
        own.close()

    def marked() -> list[str] | None:
        got = page.driver.execute_script(
            "const tr = document.querySelector(`#partitions tr[data-key='demo-2']`);"
            "return tr ? [tr.dataset.hanging, tr.textContent] : null;"
        )
        return [str(v) for v in got] if got is not None and got[0] == "true" else None

    shown = wait_until(marked, timeout_s=TXN_MAX_MS / 1000 + 20, what="demo-2 marked hanging")
    assert "HANGING: quiet" in shown[1], shown
    page.shot("hanging-transaction")

"""The orders service under failure: each test places orders, runs the service as a real
process, breaks the cluster (or the service) mid-stream by role, lets it finish, and checks the
recorded history: nothing lost, and, exactly-once, nothing twice. The commit-first variant
is caught losing orders."""

from __future__ import annotations

import pytest
from conftest import ORDERS, Shop

from minibroker.testing import (
    Cluster,
    active_controller,
    coordinator_of,
    follower_of,
    leader_of,
)

pytestmark = pytest.mark.minibroker(
    scope="function",
    settings={
        "zookeeper.session.timeout.ms": 6000,
        "replica.lag.time.max.ms": 3000,
        "group.initial.rebalance.delay.ms": 0,
    },
)


def test_at_least_once_survives_a_leader_crash(minibroker_cluster: Cluster, shop: Shop) -> None:
    shop.place_orders()
    shop.start_app("at-least-once")
    shop.wait_for_invoices(ORDERS // 4)
    minibroker_cluster.kill(leader_of("invoices", 0))
    minibroker_cluster.wait_for_new_leader("invoices", 0)
    shop.finish()
    result = shop.check("at-least-once")
    assert result.ok, result.text()


def test_at_least_once_with_a_follower_paused_past_the_lag_limit(
    minibroker_cluster: Cluster, shop: Shop
) -> None:
    shop.place_orders()
    shop.start_app("at-least-once")
    shop.wait_for_invoices(ORDERS // 4)
    # Stalled like a long GC pause: out of the ISR (through its leader once records arrive
    # that it does not fetch, or the controller when its session expires), then back.
    paused = minibroker_cluster.pause(follower_of("invoices", 1))
    minibroker_cluster.wait_for_isr_shrink("invoices", 1)
    minibroker_cluster.resume(paused.node)
    minibroker_cluster.wait_for_isr_expand("invoices", 1)
    shop.finish()
    result = shop.check("at-least-once")
    assert result.ok, result.text()


def test_at_least_once_survives_its_own_crash(minibroker_cluster: Cluster, shop: Shop) -> None:
    shop.place_orders()
    crashed = shop.start_app("at-least-once")
    shop.wait_for_invoices(ORDERS // 3)
    crashed.kill()
    crashed.wait()
    shop.start_app("at-least-once")
    shop.finish()
    result = shop.check("at-least-once")
    assert result.ok, result.text()


def test_exactly_once_survives_a_coordinator_crash(minibroker_cluster: Cluster, shop: Shop) -> None:
    shop.place_orders()
    shop.start_app("exactly-once")
    shop.wait_for_invoices(ORDERS // 4)
    minibroker_cluster.kill(coordinator_of(transactional_id="orders-app"))
    shop.finish()
    result = shop.check("exactly-once")
    assert result.ok, result.text()


def test_exactly_once_survives_a_controller_failover(
    minibroker_cluster: Cluster, shop: Shop
) -> None:
    shop.place_orders()
    shop.start_app("exactly-once")
    shop.wait_for_invoices(ORDERS // 4)
    minibroker_cluster.kill(active_controller())
    minibroker_cluster.wait_for_controller_change()
    minibroker_cluster.kill(leader_of("invoices", 2))  # the new controller elects its successor
    minibroker_cluster.wait_for_new_leader("invoices", 2)
    shop.finish()
    result = shop.check("exactly-once")
    assert result.ok, result.text()


def test_exactly_once_survives_its_own_crash(minibroker_cluster: Cluster, shop: Shop) -> None:
    shop.place_orders()
    crashed = shop.start_app("exactly-once")
    shop.wait_for_invoices(ORDERS // 3)
    crashed.kill()
    crashed.wait()
    shop.start_app("exactly-once")  # init_transactions fences the crashed run's transaction
    shop.finish()
    result = shop.check("exactly-once")
    assert result.ok, result.text()


def test_the_commit_first_variant_is_caught_losing_orders(
    minibroker_cluster: Cluster, shop: Shop
) -> None:
    """Committing before processing loses the orders of the batch a crash interrupts; the
    checker names them. The crash lands inside a committed batch (wait_mid_batch); should it
    still fall between batches (nothing lost then), again: up to five."""
    shop.place_orders()
    for _ in range(5):
        crashed = shop.start_app("commit-first", work_ms=20)
        shop.wait_mid_batch()
        crashed.kill()
        crashed.wait()
        result = shop.check("at-least-once")
        if result.of_kind("unprocessed"):
            break
    shop.start_app("commit-first")
    shop.finish()
    result = shop.check("at-least-once")
    print(result.text())
    assert not result.ok
    assert set(result.kinds()) == {"unprocessed"} | ({"duplicate"} & set(result.kinds()))
    assert "group orders-app committed past it" in result.text()

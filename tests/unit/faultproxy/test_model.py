"""The fault proxy's vocabulary: link tables, which links a request selects, requests as JSON,
the token bucket; and that these modules stay pure."""

from __future__ import annotations

import pytest

from minibroker.faultproxy.model import (
    DirectionFault,
    FaultRequest,
    FaultRequestError,
    LinkSpec,
    LinkView,
    parse_link_table,
    peer_matches,
    select,
)
from minibroker.faultproxy.pacing import TokenBucket, piece_size, pieces
from tests.unit.test_import_rules import FORBIDDEN_IN_PURE, ROOT, imported_modules, matches


def table() -> list[LinkSpec]:
    pairs = [
        ("broker-1", "broker-2"),
        ("broker-2", "broker-1"),
        ("broker-1", "zookeeper"),
        ("broker-2", "zookeeper"),
        ("client", "broker-1"),
        ("client", "broker-2"),
        ("controller-1", "broker-1"),
        ("broker-1", "controller-1"),
        ("controller-1", "zookeeper"),
    ]
    return [LinkSpec(s, t, 20000 + i, 30000 + i) for i, (s, t) in enumerate(pairs)]


def chosen(request: FaultRequest) -> dict[str, tuple[str, ...]]:
    return {spec.name: dirs for spec, dirs in select(table(), request)}


BOTH = ("forward", "backward")


@pytest.mark.parametrize(
    ("peers", "expected"),
    [
        (("brokers",), {"broker-1->broker-2": BOTH, "broker-2->broker-1": BOTH}),
        (("zookeeper",), {"broker-1->zookeeper": BOTH}),
        (("clients",), {"client->broker-1": BOTH}),
        (("controllers",), {"controller-1->broker-1": BOTH, "broker-1->controller-1": BOTH}),
        (("controller-1",), {"controller-1->broker-1": BOTH, "broker-1->controller-1": BOTH}),
        (("broker-2", "zookeeper"), {
            "broker-1->broker-2": BOTH, "broker-2->broker-1": BOTH, "broker-1->zookeeper": BOTH,
        }),
    ],
)  # fmt: skip
def test_a_node_and_peers_select_the_links_between_them(
    peers: tuple[str, ...], expected: dict[str, tuple[str, ...]]
) -> None:
    assert chosen(FaultRequest("broker-1", peers, cut=True)) == expected


def test_no_peers_or_all_select_every_link_of_the_node() -> None:
    every = chosen(FaultRequest("broker-1", cut=True))
    assert len(every) == 6 and all(d == BOTH for d in every.values())
    assert chosen(FaultRequest("broker-1", ("all",), cut=True)) == every


def test_direction_is_seen_from_the_node() -> None:
    out = chosen(FaultRequest("broker-1", ("brokers",), direction="out", cut=True))
    # broker-1 sends forward on the links it opens and backward on those opened to it.
    assert out == {"broker-1->broker-2": ("forward",), "broker-2->broker-1": ("backward",)}
    inward = chosen(FaultRequest("broker-1", ("brokers",), direction="in", cut=True))
    assert inward == {"broker-1->broker-2": ("backward",), "broker-2->broker-1": ("forward",)}
    named = chosen(FaultRequest(links=("client->broker-2",), direction="out", cut=True))
    assert named == {"client->broker-2": ("forward",)}


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (FaultRequest("broker-9", cut=True), "no link between broker-9 and all"),
        (FaultRequest("controller-1", ("clients",), cut=True), "controller-1 and clients"),
        (FaultRequest("broker-1", ("brokerz",), cut=True), "bad peer 'brokerz'"),
        (FaultRequest(links=("a->b",), cut=True), "no such link: a->b"),
    ],
)
def test_a_request_that_selects_nothing_is_an_error(request_: FaultRequest, message: str) -> None:
    with pytest.raises(FaultRequestError, match=message):
        select(table(), request_)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"cut": True}, "name a node or links"),
        ({"node": "broker-1", "links": ["x"], "cut": True}, "not both"),
        ({"node": "broker-1", "delay_ms": -1}, "delay_ms must be in"),
        ({"node": "broker-1", "delay_ms": "5"}, "delay_ms must be int"),
        ({"node": "broker-1", "cut": 1}, "cut must be bool"),
        ({"node": "broker-1", "direction": "up"}, "direction must be one of both, out, in"),
        ({"node": "broker-1", "jitter": 5}, "unknown request fields: \\['jitter'\\]"),
        ({"node": "broker-1", "peers": "brokers"}, "peers must be list"),
        ([], "a request is a JSON object"),
    ],
)
def test_bad_requests_say_what_is_wrong(obj: object, message: str) -> None:
    with pytest.raises(FaultRequestError, match=message):
        FaultRequest.from_json(obj)


def test_requests_round_trip_as_json_and_change_only_what_they_give() -> None:
    request = FaultRequest("broker-1", ("zookeeper",), direction="in", delay_ms=50, refuse=True)
    assert FaultRequest.from_json(request.to_json()) == request
    before = DirectionFault(cut=True, delay_ms=10, bandwidth=1000)
    assert request.apply(before) == DirectionFault(cut=True, delay_ms=50, bandwidth=1000)


def test_link_tables_need_distinct_names_and_ports() -> None:
    raw = [s.to_json() for s in table()]
    assert parse_link_table(raw) == table()
    with pytest.raises(FaultRequestError, match="name used twice: broker-1->broker-2"):
        parse_link_table([raw[0], {**raw[0], "listen_port": 1}])
    with pytest.raises(FaultRequestError, match="listen port used twice: 20000"):
        parse_link_table([raw[0], {**raw[1], "listen_port": 20000}])
    with pytest.raises(FaultRequestError, match="bad node name 'proxy'"):
        parse_link_table([{**raw[0], "source": "proxy", "name": "proxy->broker-2"}])


def test_peer_groups_match_node_kinds() -> None:
    assert peer_matches("client", ("clients",))
    assert peer_matches("controller-2", ("controllers",))
    assert not peer_matches("controller-2", ("brokers", "controller-1"))


def test_views_describe_their_faults_and_round_trip() -> None:
    spec = table()[0]
    view = LinkView(spec, DirectionFault(cut=True), DirectionFault(cut=True), forward_bytes=5)
    assert view.describe() == "cut"
    assert LinkView.from_json(view.to_json()) == view
    odd = LinkView(spec, DirectionFault(delay_ms=100, bandwidth=500), DirectionFault(), True)
    assert odd.describe() == "refusing; forward: delay 100 ms, 500 B/s"
    assert LinkView(spec, DirectionFault(), DirectionFault()).describe() == "ok"


def test_the_token_bucket_paces_takers_in_turn() -> None:
    bucket = TokenBucket(1000, now_s=0.0)
    assert bucket.burst == 512  # MIN_PIECE: a slow link still moves useful pieces
    assert bucket.take(512, 0.0) == 0.0
    assert bucket.take(500, 0.0) == pytest.approx(0.5)  # a debt of 500 bytes at 1000 B/s
    assert bucket.take(500, 0.0) == pytest.approx(1.0)  # the next taker queues behind it
    assert bucket.take(0, 2.0) == 0.0  # the debt is paid after 1 s; refilled since


def test_pieces_are_views_of_about_a_twentieth_of_a_second() -> None:
    assert piece_size(1_000_000) == 50_000
    cut = pieces(b"x" * 120_000, 1_000_000)
    assert [len(p) for p in cut] == [50_000, 50_000, 20_000]


@pytest.mark.parametrize(
    "rel", ["minibroker/faultproxy/model.py", "minibroker/faultproxy/pacing.py"]
)
def test_the_vocabulary_and_pacing_do_no_io(rel: str) -> None:
    bad = [m for _, m in imported_modules(ROOT / rel) if matches(m, FORBIDDEN_IN_PURE)]
    assert not bad, f"{rel} imports {bad}"

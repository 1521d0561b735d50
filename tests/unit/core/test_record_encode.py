"""The C record encoder writes exactly the bytes of its Python reference, and refuses what is
not a record with a TypeError (never a crash or a short buffer)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core import records
from minibroker.core.records import RecordFields, encode_records_py

header_keys = st.text(max_size=8)  # any code point: the key is UTF-8 encoded
maybe_bytes = st.none() | st.binary(max_size=300)  # past 127 bytes: two-byte length varints
record_fields = st.tuples(
    maybe_bytes,
    maybe_bytes,
    st.lists(st.tuples(header_keys, maybe_bytes), max_size=3).map(tuple),
    st.none() | st.integers(-(2**50), 2**50),
)
timestamps = st.integers(-(2**50), 2**50)


def native() -> Any:
    from minibroker.core import _record_encode  # type: ignore[attr-defined,unused-ignore]

    return _record_encode.encode_records


def test_the_c_encoder_is_built_and_used() -> None:
    assert records.encode_records is native(), "minibroker.core._record_encode was not built"


@given(recs=st.lists(record_fields, max_size=40), base_timestamp=timestamps)
def test_c_and_python_encode_the_same_bytes_and_max_timestamp(
    recs: list[RecordFields], base_timestamp: int
) -> None:
    assert native()(recs, base_timestamp) == encode_records_py(recs, base_timestamp)


def test_any_bytes_like_value_encodes_as_its_bytes() -> None:
    as_bytes = [(b"key", b"value", (("h", b"x"),), 5)]
    as_views: list[Any] = [(bytearray(b"key"), memoryview(b"value"), (("h", bytearray(b"x")),), 5)]
    assert native()(as_views, 0) == native()(as_bytes, 0)


@pytest.mark.parametrize(
    "record",
    [
        (b"k", b"v", ()),  # three fields
        [b"k", b"v", (), None],  # a list, not a tuple
        (1, b"v", (), None),  # a key that is not bytes
        (None, "text", (), None),  # a str value
        (None, b"v", 5, None),  # headers that are not a sequence
        (None, b"v", ((b"bytes-key", b"x"),), None),  # a header key that is not a str
        (None, b"v", (("h",),), None),  # a header without a value
        (None, b"v", (), "now"),  # a timestamp that is not an int
    ],
)
def test_what_is_not_a_record_is_a_type_error(record: Any) -> None:
    with pytest.raises(TypeError):
        native()([record], 0)


def test_a_timestamp_beyond_64_bits_is_an_overflow_error() -> None:
    with pytest.raises(OverflowError):
        native()([(None, b"v", (), 2**64)], 0)

"""`payload_object` reads a ``data:`` payload with pydantic-core's parser and falls back to
json for what that parser refuses: the object is the one `json.loads` gives, for any JSON a
server could send (a property), and for the inputs only json reads (a lone surrogate's escape,
a byte-order mark, UTF-16) or nobody reads."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectui.core.stream.dialects import payload_object

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.text(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), values, max_size=6), st.booleans(), st.booleans())
def test_an_object_reads_as_json_reads_it(obj: dict[str, Any], ascii: bool, as_text: bool) -> None:
    dumped = json.dumps(obj, ensure_ascii=ascii)
    payload: bytes | str = dumped if as_text else dumped.encode("utf-8", "surrogatepass")
    expected = json.loads(payload) if ascii or as_text else _json_or_none(payload)
    assert payload_object(payload) == expected


def _json_or_none(payload: bytes | str) -> object:
    try:
        return json.loads(payload)
    except UnicodeDecodeError:  # (a lone surrogate written raw is not UTF-8)
        return None


@pytest.mark.parametrize(
    "payload",
    [
        b'{"s":"\\ud800"}',
        b'\xef\xbb\xbf{"a":1}',
        '{"a":1}'.encode("utf-16"),
        b'{"a":1,"a":2}',
        b'{"x":1e400}',
        b'{"x":12345678901234567890123}',
        b' {"a": [1, 2.5, "\\u00e9"]} \n',
    ],
)
def test_what_only_json_reads_is_still_read(payload: bytes) -> None:
    assert payload_object(payload) == json.loads(payload)


def test_nan_reads_as_json_reads_it() -> None:
    obj = payload_object(b'{"x":NaN}')
    assert obj is not None and math.isnan(obj["x"])


@pytest.mark.parametrize(
    "payload", [b"", b"  ", b"[DONE]", "[DONE]", b"[1, 2]", b'"text"', b"{", b'{"a":\xff}', b"nul"]
)
def test_what_is_no_object_is_none(payload: bytes | str) -> None:
    assert payload_object(payload) is None

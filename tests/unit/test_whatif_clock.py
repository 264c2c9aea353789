"""`whatif` prices a run's decodes on the server's clock: the client's token times scaled so that
they sum to the run's own ``timings.predicted_ms`` (at thousands of tokens a second the client
reads the stream in bursts), and left as they are when the timings are not the run's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.compare.whatif import server_clock


@settings(max_examples=50, deadline=None)
@given(
    decodes=st.lists(st.tuples(st.integers(0, 8), st.floats(0.01, 500)), min_size=1, max_size=40),
    server_ms=st.floats(1, 10_000),
)
def test_the_decodes_sum_to_the_server_s_time_and_keep_their_shares(
    decodes: list[tuple[int, float]], server_ms: float
) -> None:
    tokens = len(decodes) + 1
    timings = {"predicted_n": float(tokens), "predicted_ms": server_ms}
    scaled = server_clock(decodes, timings, tokens)
    assert sum(ms for _, ms in scaled) == pytest.approx(server_ms, rel=1e-9)
    assert [d for d, _ in scaled] == [d for d, _ in decodes]
    total = sum(ms for _, ms in decodes)
    for (_, before), (_, after) in zip(decodes, scaled, strict=True):
        assert after / server_ms == pytest.approx(before / total, rel=1e-9)


def test_timings_of_another_count_or_none_leave_the_client_s_clock() -> None:
    decodes = [(0, 10.0), (4, 30.0)]
    assert server_clock(decodes, {}, 3) == decodes
    assert server_clock(decodes, {"predicted_n": 5.0, "predicted_ms": 80.0}, 3) == decodes
    assert server_clock(decodes, {"predicted_n": 3.0, "predicted_ms": 0.0}, 3) == decodes


def test_a_cost_model_fitted_at_n_streams_is_refused_in_one_line() -> None:
    from spectui.core.compare.costmodel import CostModel
    from spectui.core.compare.whatif import StepCounts, WhatIfError, predict_counts

    counts = StepCounts(drafted=(4, 4), accepted=(4, 2), singles=1, draft_max=4)
    model = CostModel(parameters={"decode_ms": 10.0, "drafted_ms.ngram": 2.0}, levels=[4])
    with pytest.raises(WhatIfError, match="fitted at 4 streams; whatif prices one"):
        predict_counts(counts, [(4, 20.0), (4, 20.0), (0, 10.0)], None, [2], model)

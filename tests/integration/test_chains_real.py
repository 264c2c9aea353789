"""A chain of spec types on the real llama-server, named step by step (issue #28 §3).

The tiny MTP target speaks the word cycle " alpha beta gamma ..." (24 words): until the cycle
comes round no n-gram has been seen before, so only the model drafter (draft-mtp) can serve the
early steps; once it has, the n-gram member finds every key earlier in the history, and the
server, which tries the n-gram types first, takes its draft. The server never says which drafter
made a step, except in its debug log (``-v``): ``called impl <type>, hist size = H, ...,
gen = N`` for every draft it takes, in order, and per request ``statistics <type>`` with each
drafter's totals. spectui's name for every step must be that log's, and its per-drafter sums
the totals, the statistics' and the ``/metrics`` deltas.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Literal

import httpx
import pytest

from helpers.cli import spectui
from spectui.core.engine.live import launch_engine
from spectui.core.events import StepEvent, SummaryEvent, TokenEvent, TokenOrigin
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.protocol import ServerMetrics
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.testing.tiny_models import TinyModels

from .outside import FAST, outside_server, wait_healthy

pytestmark = pytest.mark.server

PROMPT = "Hello alpha beta"
N_PREDICT = 80
"""The cycle comes round after 24 tokens: the later two thirds are the n-gram member's."""
NGRAM_SIMPLE = ("--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8")
NGRAM_MOD = (
    "--spec-ngram-mod-n-match", "3", "--spec-ngram-mod-n-max", "8", "--spec-ngram-mod-n-min", "1",
)  # fmt: skip
"""Short keys, so the n-gram member drafts within one cycle of 24 words."""
NGRAM_MAP = {
    kind: (f"--spec-{kind}-size-n", "3", f"--spec-{kind}-size-m", "8")
    for kind in ("ngram-map-k", "ngram-map-k4v")
}

_CALLED = re.compile(r"called impl (\S+), hist size = (\d+), call_count = \d+, gen = (\d+)")
_STATS = re.compile(
    r"statistics\s+(\S+): .*#gen drafts =\s*(\d+), #acc drafts =\s*\d+, "
    r"#gen tokens =\s*(\d+), #acc tokens =\s*(\d+)"
)


def _called(log: str) -> list[tuple[str, int, int]]:
    """(type, history length, draft length) of every draft the server took, in order."""
    return [(m[1], int(m[2]), int(m[3])) for m in _CALLED.finditer(log)]


def _statistics(log: str) -> dict[str, tuple[int, int, int]]:
    """Type -> (drafted, accepted, steps) so far, from the server's last statistics lines."""
    out: dict[str, tuple[int, int, int]] = {}
    for m in _STATS.finditer(log):
        out[m[1]] = (int(m[3]), int(m[4]), int(m[2]))
    return out


def _metrics(url: str) -> ServerMetrics:
    return ServerMetrics.parse(httpx.get(f"{url}/metrics", timeout=10).text)


def _deltas(before: ServerMetrics, after: ServerMetrics) -> tuple[int, int, int]:
    return (
        after.spec_drafted - before.spec_drafted,
        after.spec_accepted - before.spec_accepted,
        after.spec_steps - before.spec_steps,
    )


def _check_steps(steps: list[dict[str, object]], called: list[tuple[str, int, int]]) -> None:
    """Every step named as the server's log says, and where the log says it began."""
    assert [s["drafter"] for s in steps] == [c[0] for c in called]
    assert [s["drafted"] for s in steps] == [c[2] for c in called]
    # The history before a step is the prompt and the tokens before the step's first one but
    # the last sampled: the same prompt length for every step, so the log lines are the steps.
    offsets = {c[1] - int(str(s["first_token"])) for s, c in zip(steps, called, strict=True)}
    assert len(offsets) == 1


@pytest.mark.parametrize("acceptance", ["full", "partial"])
def test_stream_names_every_step_of_a_chain(
    acceptance: Literal["full", "partial"],
    tiny_models: TinyModels,
    llama_binary: Path,
    tmp_path: Path,
) -> None:
    """`spectui stream --format jsonl` against a server started outside spectui: ngram-simple
    keeps no state, so every step can be named even there. With the partial MTP head the model
    drafter's steps reject some of their drafts."""
    log_path = tmp_path / "server.log"
    with outside_server(
        llama_binary,
        tiny_models.mtp(acceptance),
        "--metrics",
        "--spec-type", "ngram-simple,draft-mtp",
        "--spec-draft-n-max", "2",
        *NGRAM_SIMPLE,
        "-v", "--log-file", str(log_path),
    ) as (url, _pid):  # fmt: skip
        wait_healthy(url, give_up_s=60)
        before = _metrics(url)
        result = spectui(
            "stream", "--url", url, "--prompt", PROMPT, "--n-predict", str(N_PREDICT),
            "--temperature", "0", "--format", "jsonl",
        )  # fmt: skip
        after = _metrics(url)
    assert result.returncode == 0, result.stderr
    log = log_path.read_text(errors="replace")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    tokens = [r for r in records if r["type"] == "token"]
    summary = records[-1]
    assert summary["type"] == "summary"

    called = _called(log)
    kinds = [c[0] for c in called]
    assert kinds[0] == "draft-mtp" and kinds[-1] == "ngram-simple"  # the model first, then ...
    first_ngram = kinds.index("ngram-simple")
    assert set(kinds[first_ngram:]) == {"ngram-simple"}  # ... the n-grams take every step
    _check_steps(steps, called)

    by_drafter = summary["by_drafter"]
    totals = (summary["drafted"], summary["accepted"], summary["steps"])
    assert totals == _deltas(before, after)
    sums = tuple(sum(s[k] for s in by_drafter.values()) for k in ("drafted", "accepted", "steps"))
    assert sums == totals
    stats = _statistics(log)
    for name in ("ngram-simple", "draft-mtp"):
        got = by_drafter[name]
        assert (got["drafted"], got["accepted"], got["steps"]) == stats[name]
    mtp = by_drafter["draft-mtp"]
    assert (mtp["accepted"] < mtp["drafted"]) is (acceptance == "partial")
    # Every accepted draft token carries its step's drafter; target tokens none.
    step_drafter = {s["index"]: s["drafter"] for s in steps}
    for token in tokens:
        if token["origin"] == "draft":
            assert token["drafter"] == step_drafter[token["step"]]
        else:
            assert token["drafter"] is None


@pytest.mark.parametrize(
    ("member", "flags"),
    [("ngram-mod", NGRAM_MOD), *NGRAM_MAP.items()],
    ids=["ngram-mod", "ngram-map-k", "ngram-map-k4v"],
)
def test_engine_names_a_stateful_member_across_requests(
    member: str,
    flags: tuple[str, ...],
    tiny_models: TinyModels,
    llama_binary: Path,
    caps: Capabilities,
    tmp_path: Path,
) -> None:
    """The live engine on a server it started: a stateful member's state outlives a request
    (ngram-mod's pool; the ngram-map types' keys, per slot), so the second request's steps are
    named from what the first left in it."""
    spec = SpecConfig(types=(member, "draft-mtp"), draft_n_max=2, extra_args=flags)
    log_path = tmp_path / "server.log"
    engine = launch_engine(
        llama_binary,
        caps,
        tiny_models.mtp("full"),
        spec,
        ctx_size=1024,
        extra_args=("--metrics", *FAST, "-v", "--log-file", str(log_path)),
    )

    async def run_twice() -> tuple[list[list[StepEvent]], list[SummaryEvent], list[int]]:
        steps: list[list[StepEvent]] = []
        summaries: list[SummaryEvent] = []
        deltas: list[int] = []
        try:
            async for _ in engine.start():
                pass
            url = engine.info.url
            for prompt in (PROMPT, "Hello gamma delta epsilon"):
                before = await asyncio.to_thread(_metrics, url)
                request = GenerationRequest(prompt=prompt, n_predict=N_PREDICT)
                mine: list[StepEvent] = []
                async for event in engine.run(request):
                    if isinstance(event, StepEvent):
                        mine.append(event)
                    elif isinstance(event, TokenEvent) and event.origin is TokenOrigin.DRAFT:
                        assert event.drafter == mine[-1].drafter
                    elif isinstance(event, SummaryEvent):
                        summaries.append(event)
                after = await asyncio.to_thread(_metrics, url)
                steps.append(mine)
                deltas.extend(_deltas(before, after))
        finally:
            await engine.aclose()
        return steps, summaries, deltas

    steps, summaries, deltas = asyncio.run(run_twice())
    log = log_path.read_text(errors="replace")
    called = _called(log)
    flat = [s.model_dump() for run in steps for s in run]
    assert [s["drafter"] for s in flat] == [c[0] for c in called]
    assert "unknown" not in {s["drafter"] for s in flat}
    assert {s["drafter"] for s in flat} == {member, "draft-mtp"}
    if member == "ngram-mod":
        # The second request starts with ngram-mod's pool from the first: its first step is
        # ngram-mod's, which a fresh start could not draft.
        assert steps[1][0].drafter == "ngram-mod"
    for i, summary in enumerate(summaries):
        m = summary.metrics
        assert (m.drafted, m.accepted, m.steps) == tuple(deltas[3 * i : 3 * i + 3])
        shares = m.by_drafter.values()
        sums = [sum(getattr(s, k) for s in shares) for k in ("drafted", "accepted", "steps")]
        assert sums == [m.drafted, m.accepted, m.steps]


def test_a_stateful_member_on_a_server_spectui_did_not_start_is_unknown(
    tiny_models: TinyModels, llama_binary: Path
) -> None:
    """ngram-mod's pool holds what every earlier request left, which spectui did not see:
    whether it drafted at a step cannot be known, so no step is named, not even the model's."""
    with outside_server(
        llama_binary,
        tiny_models.mtp("full"),
        "--spec-type", "ngram-mod,draft-mtp",
        "--spec-draft-n-max", "2",
        *NGRAM_MOD,
    ) as (url, _pid):  # fmt: skip
        wait_healthy(url, give_up_s=60)
        result = spectui(
            "stream", "--url", url, "--prompt", PROMPT, "--n-predict", "40",
            "--temperature", "0", "--format", "jsonl",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    summary = records[-1]
    assert steps and {s["drafter"] for s in steps} == {"unknown"}
    share = summary["by_drafter"]["unknown"]
    assert (share["drafted"], share["accepted"], share["steps"]) == (
        summary["drafted"],
        summary["accepted"],
        summary["steps"],
    )

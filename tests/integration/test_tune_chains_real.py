"""Tune's chains on a real llama-server: the tiny MTP target of `spectui.testing`, ngram-simple
and draft-mtp at their defaults. Round one runs each; once it is run, a chain of ngram-simple's
best candidate before draft-mtp's joins the plan and runs from round two, one config launched and
measured as a whole, with drafts from both members."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from spectui.app_setup import compare_setup
from spectui.commands.tune import load_tune
from spectui.config import Settings
from spectui.core.compare.budget import resolve_budget
from spectui.core.compare.models import ComparePrompt
from spectui.core.compare.store import ServerOptions
from spectui.core.request import Sampling
from spectui.core.tune.runner import TuneRunner
from spectui.core.tune.setup import new_tune
from spectui.testing.tiny_models import TinyModels

from .outside import FAST

pytestmark = pytest.mark.server

N_PREDICT = 96
PROMPT = ComparePrompt(key="cycle", text="Hello alpha beta", n_predict=N_PREDICT)
"""The tiny target continues its word cycle: ngram-simple drafts once the cycle repeats."""


async def test_a_chain_of_round_ones_best_ngram_candidate_runs_from_round_two(
    tiny_models: TinyModels, llama_binary: Path, tmp_path: Path
) -> None:
    settings = Settings(model=tiny_models.mtp("partial"), server_bin=llama_binary)
    setup = compare_setup(settings, server=ServerOptions(ctx_size=1024, extra_args=list(FAST)))
    document = new_tune(
        setup,
        prompts=(PROMPT,),
        sampling=Sampling(n_predict=N_PREDICT),
        budget=resolve_budget(None),
        budget_s=1200,  # generous: a loaded machine must not end the race early
        types=["ngram-simple", "draft-mtp"],
        draft_model=None,
        defaults_only=True,
    )
    assert not [c for c in document.space if "," in c.type], "no chain before round one"
    out = tmp_path / "tune.json"
    engine = setup.engine(document.compare.plan.configs[0].spec)
    try:
        async with contextlib.aclosing(TuneRunner(engine, document, outputs=[out]).run()) as run:
            async for _ in run:
                pass
    finally:
        await engine.aclose()
    doc = load_tune(out)
    plan = doc.compare.plan
    (chain,) = [c for c in doc.space if "," in c.type]
    assert chain.type == "ngram-simple,draft-mtp"
    assert plan.active is not None and len(plan.active) >= 2
    assert chain.text not in plan.active[0] and chain.text in plan.active[1]
    runs = [r for r in doc.compare.runs if r.config == chain.text and not r.warmup]
    assert runs and all(r.status == "ok" and r.tokens == N_PREDICT for r in runs)
    assert all(r.round >= 2 for r in runs)
    assert sum(r.drafted for r in runs) > 0
    result = next(c for c in doc.candidates if c.config == chain.text)
    assert result.args[:2] == ["--spec-type", "ngram-simple,draft-mtp"]
    assert result.rounds == len({r.round for r in runs})

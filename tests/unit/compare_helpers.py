"""Builders for the compare tests: plans, documents, records (the scripted engine and the setup
that hands it out: `helpers.engines`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from helpers.engines import FakeSetup, ScriptedEngine
from helpers.sse import FIXTURES
from spectui.commands.compare import CompareOptions
from spectui.core.compare.checkers import Checker
from spectui.core.compare.divergence import ProbeError, ProbeRequest
from spectui.core.compare.models import (
    CompareConfig,
    ComparePlan,
    ComparePrompt,
)
from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import CompareDocument
from spectui.core.compare.textdiff import TokenProb, token_ends
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import Sampling
from spectui.core.tune.models import TuneDocument
from spectui.core.tune.runner import new_document


def compare_options(**flags: object) -> CompareOptions:
    """`spectui compare`'s options as the command line builds them (`cli.main`): from a parsed
    namespace, so ``given`` names every flag that is not None."""
    return CompareOptions.from_namespace(argparse.Namespace(**flags))


def config(text: str) -> CompareConfig:
    spec = SpecConfig.parse(text)
    return CompareConfig(name=text, spec=spec, args=("--spec-type", ",".join(spec.types)))


def plan(
    configs: tuple[str, ...] = ("none", "ngram-simple", "ngram-mod"),
    prompts: tuple[str, ...] = ("a", "b"),
    reps: int = 2,
    *,
    checks: dict[str, Checker] | None = None,
    temperature: float = 0.0,
) -> ComparePlan:
    return ComparePlan(
        configs=tuple(config(c) for c in configs),
        prompts=tuple(
            ComparePrompt(key=k, text=f"prompt {k}", n_predict=8, check=(checks or {}).get(k))
            for k in prompts
        ),
        reps=reps,
        sampling=Sampling(temperature=temperature),
    )


def document(p: ComparePlan) -> CompareDocument:
    setup = FakeSetup()
    return CompareDocument.new(
        p, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )


def record(
    config: str,
    prompt: str,
    round_: int,
    *,
    seq: int = 0,
    tps: float = 10.0,
    total_ms: float = 1000.0,
    tokens: int = 10,
    text: str = "same answer",
    rss: int = 400 * 2**20,
    status: str = "ok",
    warmup: bool = False,
    check_status: str | None = None,
    tokens_text: list[str] | None = None,
) -> RunRecord:
    """A finished run; ``tokens_text``: its tokens (the text is their concatenation)."""
    if tokens_text is not None:
        text = "".join(tokens_text)
    return RunRecord(
        seq=seq,
        config=config,
        prompt=prompt,
        round=round_,
        warmup=warmup,
        status=status,
        error=None if status == "ok" else "boom",
        tokens=tokens if status == "ok" else 0,
        tokens_per_second=tps if status == "ok" else None,
        total_ms=total_ms if status == "ok" else None,
        ttft_ms=100.0 if status == "ok" else None,
        text=text if status == "ok" else "",
        token_ends=(token_ends(tokens_text) if tokens_text is not None else [len(text)])
        if status == "ok"
        else [],
        peak_rss_bytes=rss if status == "ok" else None,
        check_status=check_status,
    )


def help_caps_path() -> Path:
    return FIXTURES / "help.txt"


BASELINE = "the answer to a is forty two"
CHANGED = "the answer to a is Forty two"
"""ngram-simple's answer: the other side of a near-tie at token 5."""


@dataclass
class FakeProber:
    """Answers every probe with ``top``; notes the request and the spec the server ran."""

    engine: ScriptedEngine
    """Whose spec the probed server runs."""
    top: list[TokenProb] = field(
        default_factory=lambda: [
            TokenProb(token="forty ", prob=0.41),
            TokenProb(token="Forty ", prob=0.40),
        ]
    )
    """The candidates every probe answers."""
    fail: bool = False
    """Fail every probe instead."""
    seen: list[tuple[ProbeRequest, str]] = field(default_factory=list)
    """Each probe's request and the spec types it ran on."""

    async def top_candidates(self, request: ProbeRequest) -> list[TokenProb]:
        self.seen.append((request, ",".join(self.engine.spec.types)))
        if self.fail:
            raise ProbeError("/completion: HTTP 500")
        return self.top


TUNE_SPEEDS = {"ngram-simple": 500.0, "ngram-mod": 1500.0, "ngram-cache": 1000.0}
"""Total ms of a run per spec type (the baseline: 1000): 2x, 0.67x and a tie."""


def tune_document(prompts: tuple[str, ...] = ("a",), budget_s: float = 600.0) -> TuneDocument:
    """A fresh tune of none and the three ngram types (`TUNE_SPEEDS`), one round per step."""
    p = plan(("none", "ngram-simple", "ngram-mod", "ngram-cache"), prompts, reps=1)
    return new_document(
        document(p),
        budget_s=budget_s,
        launch=["llama-server", "-m", "m.gguf"],
        skipped=[],
        space=[],
    )

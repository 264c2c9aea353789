"""Every spec type on the real llama-server, with the tiny constructed models:
`spectui stream --format jsonl` attaches to a server started here and its counts — drafted,
accepted, steps, per position, token origins — must equal the server's own `/metrics` deltas.

draft-mtp (n-max 1, 2, 3; with and without n-min), draft-eagle3, draft-dflash and draft-dspark
at full, partial and zero acceptance, draft-mtp / draft-simple with rejection sampling
(temperature > 0, `--spec-draft-sampling probabilistic`), and ngram-simple, ngram-mod and
ngram-cache on the plain target (ngram-map-k and -k4v, which draft from an earlier request's map,
are in test_chains_real.py): with those, all ten of the binary's speculative types. Two partial
configs are also recorded (the replayed summary equals the live one) and streamed through
`spectui proxy` (its record equals the deltas). One server per config, 40 tokens each: the tiny
models generate them in a few milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import pytest

from spectui.cli import main
from spectui.core.llama.protocol import ServerMetrics
from spectui.testing.tiny_models import TinyModels
from spectui.testing.tiny_vocab import WORDS

from .outside import outside_server, wait_healthy
from .proxy_helpers import delta, running_proxy, server_metrics

pytestmark = pytest.mark.server

PROMPT = "Hello alpha beta"
"""Pinned: partial acceptance lines up with the draft rounds, so it depends on the prompt."""
N_PREDICT = 40
NGRAM_PROMPT = "Hello" + "".join(f" {word}" for word in WORDS) * 2 + " alpha beta"
"""For the n-gram types: the word loop twice already in the prompt, so the history holds every
n-gram the answer repeats from its first token on, each seen with what follows it (the map
types draft from a key once it has been followed by the same tokens)."""

Acc = Literal["full", "partial", "zero"]

RECORDED = {"draft-mtp-partial-nmax2-nmin1", "draft-eagle3-partial-nmax3"}
"""Configs whose run is also recorded: the replayed summary must be the live one."""


@dataclass(frozen=True)
class Config:
    """One server configuration and the run made against it."""

    spec_type: str
    acceptance: Acc
    n_max: int
    n_min: int | None = None
    temperature: float = 0.0

    @property
    def prompt(self) -> str:
        """The pinned prompt; a whole word cycle for the n-gram types."""
        return NGRAM_PROMPT if self.spec_type.startswith("ngram-") else PROMPT

    @property
    def id(self) -> str:
        n_min = f"-nmin{self.n_min}" if self.n_min is not None else ""
        temp = f"-t{self.temperature:g}" if self.temperature else ""
        return f"{self.spec_type}-{self.acceptance}-nmax{self.n_max}{n_min}{temp}"

    def model(self, models: TinyModels) -> Path:
        """The target: the MTP variant of this acceptance, else the plain one."""
        if self.spec_type == "draft-mtp":
            return models.mtp(self.acceptance)
        return models.target_plain

    def server_args(self, models: TinyModels) -> list[str]:
        """Everything but `-m`: the spec config, `-md`, and `--metrics`."""
        args = ["--metrics", "--spec-type", self.spec_type]
        kind = self.spec_type.removeprefix("draft-")
        if kind.startswith("ngram-"):  # drafts from the token history: no draft model
            pass
        elif kind == "simple":  # the tiny target as its own draft model
            args += ["-md", str(models.target_plain)]
        elif kind != "mtp":
            args += ["-md", str(models.drafter(kind, self.acceptance))]  # type: ignore[arg-type]  # a drafter kind
        args += ["--spec-draft-n-max", str(self.n_max)]
        if self.n_min is not None:
            args += ["--spec-draft-n-min", str(self.n_min)]
        if self.temperature:
            args += ["--spec-draft-sampling", "probabilistic"]
        return args


def _cases() -> list[object]:
    cases: list[object] = []
    for acc in ("full", "partial", "zero"):
        for n_max, n_min in ((1, None), (2, 1), (2, None), (3, None), (3, 2)):
            config = Config("draft-mtp", acc, n_max, n_min)
            cases.append(pytest.param(config, id=config.id))
        for kind in ("draft-eagle3", "draft-dflash", "draft-dspark"):
            config = Config(kind, acc, 3)
            cases.append(pytest.param(config, id=config.id))
    # rejection sampling: the partial head's wrong drafts are rejected, the others accepted
    probabilistic = [
        Config("draft-mtp", "full", 3, temperature=0.8),
        Config("draft-mtp", "partial", 3, temperature=0.8),
        Config("draft-simple", "full", 3, temperature=0.8),
    ]
    cases += [pytest.param(config, id=config.id) for config in probabilistic]
    # The n-gram types on the plain target, its word loop in the prompt ("full": the loop never
    # changes, every draft fits). ngram-map-k and -k4v draft only from a slot's map built by an
    # earlier request: tests/integration/test_chains_real.py runs them, two requests a server.
    for kind in ("ngram-simple", "ngram-mod", "ngram-cache"):
        config = Config(kind, "full", 8)
        cases.append(pytest.param(config, id=config.id))
    return cases


def _metrics(url: str) -> ServerMetrics:
    return ServerMetrics.parse(httpx.get(f"{url}/metrics", timeout=10).text)


def _per_position_delta(before: ServerMetrics, after: ServerMetrics) -> list[int]:
    old, new = before.accepted_per_position, after.accepted_per_position
    old = old + [0] * (len(new) - len(old))
    return _trimmed([n - o for n, o in zip(new, old, strict=True)])


def _trimmed(counts: list[int]) -> list[int]:
    while counts and counts[-1] == 0:
        counts = counts[:-1]
    return counts


def _stream(url: str, config: Config, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """`spectui stream --format jsonl` against `url` (in this process: the command's own code
    path without a Python start per config); its stdout."""
    generation = ["--n-predict", str(N_PREDICT), "--temperature", str(config.temperature)]
    argv = [
        "stream",
        "--url",
        url,
        "--prompt",
        config.prompt,
        *generation,
        "--format",
        "jsonl",
        *extra,
    ]
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


@pytest.mark.parametrize("config", _cases())
def test_stream_counts_equal_server_metrics(
    config: Config,
    tiny_models: TinyModels,
    llama_binary: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session = tmp_path / "run.spectui"
    record = ("--record", str(session)) if config.id in RECORDED else ()
    model, args = config.model(tiny_models), config.server_args(tiny_models)
    with outside_server(llama_binary, model, *args) as (url, _pid):
        wait_healthy(url, give_up_s=60)
        before = _metrics(url)
        out = _stream(url, config, capsys, *record)
        after = _metrics(url)
    records = [json.loads(line) for line in out.splitlines()]
    tokens = [r for r in records if r["type"] == "token"]
    steps = [r for r in records if r["type"] == "step"]
    summary = records[-1]
    assert summary["type"] == "summary", records[-3:]

    drafted = after.spec_drafted - before.spec_drafted
    accepted = after.spec_accepted - before.spec_accepted
    n_steps = after.spec_steps - before.spec_steps
    assert drafted > 0, "every config drafts"
    if config.acceptance == "full" and not config.temperature:
        assert accepted == drafted
    if config.acceptance == "zero":
        assert accepted == 0
    if config.acceptance == "partial":
        assert 0 < accepted < drafted

    assert (summary["drafted"], summary["accepted"], summary["steps"]) == (
        drafted,
        accepted,
        n_steps,
    )
    assert _trimmed(summary["accepted_per_position"]) == _per_position_delta(before, after)
    assert (sum(s["drafted"] for s in steps), sum(s["accepted"] for s in steps)) == (
        drafted,
        accepted,
    )
    assert len(steps) == n_steps
    assert len(tokens) == summary["tokens"] == summary["server_timings"]["predicted_n"]
    assert sum(t["origin"] == "draft" for t in tokens) == accepted
    if not config.temperature and config.acceptance != "zero":
        # the word cycle, continuing from the prompt's last word
        assert "".join(t["text"] for t in tokens).startswith(" gamma delta epsilon")
    if record:
        # the recorded run replays with the same counts
        assert main(["replay", str(session), "--summary"]) == 0
        assert json.loads(capsys.readouterr().out) == summary


PROXIED = [Config("draft-mtp", "partial", 2, 1), Config("draft-eagle3", "partial", 3)]


@pytest.mark.parametrize("config", [pytest.param(c, id=c.id) for c in PROXIED])
async def test_proxy_attribution_equals_server_metrics(
    config: Config, tiny_models: TinyModels, llama_binary: Path
) -> None:
    """A client streaming through `spectui proxy`: the request's record counts what the server
    counted (the proxy runs in this event loop; the server is the test's own)."""
    model, args = config.model(tiny_models), config.server_args(tiny_models)
    body = {"prompt": PROMPT, "n_predict": N_PREDICT, "stream": True, "temperature": 0}
    with outside_server(llama_binary, model, *args) as (upstream, _pid):
        wait_healthy(upstream, give_up_s=60)
        async with running_proxy(upstream) as (url, _proxy, collected):
            before = await server_metrics(upstream)
            async with httpx.AsyncClient(timeout=60) as http:
                response = await http.post(url + "/completion", json=body)
            assert response.status_code == 200
            after = await server_metrics(upstream)
            (record,) = await collected.wait_for(1)
    steps, drafted, accepted, histogram = delta(before, after)
    assert 0 < accepted < drafted
    assert record.metrics is not None
    m = record.metrics
    assert (m.steps, m.drafted, m.accepted) == (steps, drafted, accepted)
    assert _trimmed(list(m.accepted_per_position)) == histogram
    assert record.tokens == N_PREDICT

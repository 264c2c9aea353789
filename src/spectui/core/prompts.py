"""The built-in prompt library: representative tasks where speculation wins, and where it loses.

Measured on Gemma 3 270M, 2 CPU cores, temperature 0: repeating a table and adding a row runs
~3x faster with ngram-mod; rewriting a JSON list runs ~0.6x with ngram-simple. Both directions are
here so a demo can show a win *and* a loss.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BuiltinPrompt(BaseModel):
    """One prompt of the library."""

    model_config = ConfigDict(frozen=True)

    key: str
    """Short identifier, e.g. 'table-row'."""
    title: str
    """What the task is, for the picker."""
    expectation: str
    """What speculation is expected to do here, in a few words."""
    text: str
    """The prompt itself."""
    n_predict: int = 200
    """A sensible generation length for the task."""


_TABLE = """| id | name    | role      | city     |
|----|---------|-----------|----------|
| 1  | Alice   | engineer  | Lisbon   |
| 2  | Bob     | designer  | Oslo     |
| 3  | Chen    | manager   | Taipei   |
| 4  | Dana    | engineer  | Nairobi  |
| 5  | Emil    | analyst   | Prague   |
"""

_CODE = """def add(a, b):
    return a + b

def sub(a, b):
    return a - b

def mul(a, b):
    return a * b

def div(a, b):
    return a / b
"""

_DOCUMENT = """Invoice INV-2291 was issued on 3 March 2025 by Northwind Traders, 12 Harbour Street,
Bristol, to Contoso Ltd. It covers 40 units of part A-17 at 12.50 EUR each and 5 units of
part B-02 at 99.00 EUR each. Payment is due within 30 days to IBAN GB33BUKB20201555555555.
"""

BUILTIN_PROMPTS: tuple[BuiltinPrompt, ...] = (
    BuiltinPrompt(
        key="table-row",
        title="Repeat a table, then add a row",
        expectation="n-gram drafts shine (~3x with ngram-mod)",
        text=f"Staff table:\n\n{_TABLE}\nThe same table again, with a row added for id 6 "
        "(Farah, engineer, Dublin):\n\n",
        n_predict=220,
    ),
    BuiltinPrompt(
        key="code-edit",
        title="Code edit close to the context",
        expectation="n-gram drafts copy the context: a win",
        text=f"{_CODE}\n# The four functions above again, now with type hints:\n\n",
        n_predict=160,
    ),
    BuiltinPrompt(
        key="json-rewrite",
        title="Rewrite a JSON list",
        expectation="drafts rarely match: often slower (~0.6x)",
        text='Rewrite this list as JSON objects with keys "name" and "age":\n'
        "Ann 31, Bo 25, Cy 47, Di 19, Ed 52, Flo 38, Gus 29, Hal 61\n\nJSON:\n",
        n_predict=160,
    ),
    BuiltinPrompt(
        key="essay",
        title="Long free-form answer",
        expectation="little to copy: acceptance stays low",
        text="Write a short essay about why lighthouses were important for sailors.\n\n",
        n_predict=256,
    ),
    BuiltinPrompt(
        key="extract",
        title="Extract fields from a document",
        expectation="copies spans of the document: a modest win",
        text=f"{_DOCUMENT}\nExtract the invoice number, date, seller, buyer and IBAN as "
        "'field: value' lines.\n\n",
        n_predict=100,
    ),
    BuiltinPrompt(
        key="two-lines",
        title="A two-line reply",
        expectation="TTFT dominates: speculation barely matters",
        text="Q: What is the capital of Portugal? Answer in one short sentence.\nA:",
        n_predict=24,
    ),
)
"""The library, in the order the picker shows it."""

CODE_EDIT_TESTS = """
import ast
lines = response.splitlines()
start = next((i for i, line in enumerate(lines) if line.startswith("def ")), None)
assert start is not None, "no function definition in the response"
# n_predict may cut the answer mid-line: test the longest start of the code that parses.
for end in range(len(lines), start, -1):
    source = "\\n".join(lines[start:end])
    try:
        ast.parse(source)
    except SyntaxError:
        continue
    break
else:
    raise AssertionError("no complete function in the response")
code = {}
exec(compile(source, "<response>", "exec"), code)
cases = {"add": 9, "sub": 5, "mul": 14, "div": 3.5}
found = [name for name in cases if callable(code.get(name))]
assert found, "none of add, sub, mul, div is defined again"
for name in found:
    got = code[name](7, 2)
    assert got == cases[name], f"{name}(7, 2) returns {got!r}, not {cases[name]!r}"
"""
"""code-edit's test, for its Python checker: the functions the answer defines again still
compute what the originals did (type hints or not; a cut-off tail is left out)."""

DEFAULT_PROMPT_KEY = "table-row"
"""Preselected in the TUI and used by `make demo`."""


def builtin_prompt(key: str) -> BuiltinPrompt:
    """Look a prompt up by key; KeyError names the keys that exist."""
    for prompt in BUILTIN_PROMPTS:
        if prompt.key == key:
            return prompt
    known = ", ".join(p.key for p in BUILTIN_PROMPTS)
    raise KeyError(f"no built-in prompt {key!r} (known: {known})")

"""Checkers: is a response still *correct*, not only fast?

A prompt may carry a `Checker`: required JSON fields (extraction tasks), a regular expression,
and/or a Python snippet with asserts (code tasks). Every part must pass. The snippet runs in a
separate interpreter with a timeout, so a checker that loops, crashes or raises is reported as
such on that run, and never takes the comparison down with it.

A Python snippet is code: it runs only when its source is trusted (a prompt file the user named,
not a results file someone sent). Untrusted, it is skipped and the run says so ('skipped'),
which is neither a pass nor a failure; the JSON-field and regex parts are data and still run.
A regex is data that can still cost unbounded time (``(x+x+)+y`` backtracks exponentially), so
it runs under the `regex` library's ``timeout``, in a worker thread that releases the GIL:
over `REGEX_TIMEOUT_S` the verdict is 'timeout', and the comparison goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

CheckStatus = Literal["passed", "failed", "error", "timeout", "skipped"]

DEFAULT_TIMEOUT_S = 10.0
"""How long a Python checker may run (a fresh interpreter starts in ~50 ms)."""
REGEX_TIMEOUT_S = 2.0
"""How long a regex checker may search one response (a sane pattern takes microseconds)."""

# Runs in a fresh `python -I`: reads {"snippet", "response"} from stdin, executes the snippet with
# `response` bound. Exit 0: passed; 1: an assert failed; 2: the snippet raised something else.
_HARNESS = r"""
import json, sys, traceback
data = json.loads(sys.stdin.read())
snippet = data["snippet"]
namespace = {"__name__": "__checker__", "response": data["response"]}
def where(error):
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == "<checker>"]
    if not frames:
        return ""
    line = snippet.splitlines()[frames[-1].lineno - 1].strip()
    return f"line {frames[-1].lineno}: {line}"
try:
    exec(compile(snippet, "<checker>", "exec"), namespace)
except AssertionError as error:
    print(str(error) or where(error) or "assertion failed", file=sys.stderr)
    sys.exit(1)
except BaseException as error:
    place = where(error)
    suffix = f" ({place})" if place else ""
    print(f"{type(error).__name__}: {error}{suffix}", file=sys.stderr)
    sys.exit(2)
"""


class CheckResult(BaseModel):
    """What a checker said about one response."""

    model_config = ConfigDict(frozen=True)

    status: CheckStatus
    """passed; failed (the response is wrong); error (the checker raised); timeout; skipped
    (the other parts passed, but the Python part is untrusted code and did not run)."""
    detail: str = ""
    """Why it did not pass, in one line."""

    @property
    def passed(self) -> bool:
        """Whether the response passed every part of the checker."""
        return self.status == "passed"


class Checker(BaseModel):
    """Conditions a correct response meets; every given part must pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    json_fields: tuple[str, ...] = ()
    """The response holds a JSON object (or a list of objects) with all these fields."""
    regex: str | None = None
    """A regular expression the response must match somewhere (multiline mode)."""
    python: str | None = None
    """Python statements with asserts; ``response`` holds the response text."""
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """How long the Python snippet may run before it counts as 'timeout'."""

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                regex.compile(value, regex.MULTILINE)
            except regex.error as error:
                raise ValueError(f"regex {value!r} does not compile: {error}") from None
        return value

    @field_validator("python")
    @classmethod
    def _python_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile(value, "<checker>", "exec")
            except SyntaxError as error:
                raise ValueError(
                    f"python checker does not compile: {error.msg} (line {error.lineno})"
                ) from None
        return value

    @property
    def empty(self) -> bool:
        """Whether the checker checks nothing."""
        return not self.json_fields and self.regex is None and self.python is None

    @property
    def runs_code(self) -> bool:
        """Whether checking runs code (a Python snippet), not only matches data."""
        return self.python is not None

    def describe(self) -> str:
        """A few words on what is checked, for reports."""
        parts = []
        if self.json_fields:
            parts.append("JSON fields " + ", ".join(self.json_fields))
        if self.regex is not None:
            parts.append(f"regex /{self.regex}/")
        if self.python is not None:
            parts.append("python asserts")
        return "; ".join(parts) or "nothing"


_OPENER = regex.compile(r"[\[{]")


def _span_end(text: str, start: int) -> int | None:
    """Where the bracketed value opening at ``start`` closes (strings respected), or None."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def find_json(text: str) -> object | None:
    """The first complete top-level JSON object or array in ``text`` (models wrap JSON in prose
    and fences). A value cut short (n_predict ran out) is not complete, and neither is any object
    inside it: half a list must not pass for its first item."""
    decoder = json.JSONDecoder()
    position = 0
    while (match := _OPENER.search(text, position)) is not None:
        try:
            value: object = decoder.raw_decode(text, match.start())[0]
        except json.JSONDecodeError:
            end = _span_end(text, match.start())
            if end is None:
                return None  # never closes: everything after it is inside a cut-off value
            position = end  # balanced but not JSON (prose in braces): look after it
            continue
        return value
    return None


def check_json_fields(text: str, fields: tuple[str, ...]) -> CheckResult:
    """Whether the response's first JSON value (object, or list of objects) has ``fields``."""
    value = find_json(text)
    if value is None:
        return CheckResult(
            status="failed", detail="no complete JSON object or list in the response"
        )
    items = value if isinstance(value, list) else [value]
    if not items:
        return CheckResult(status="failed", detail="the JSON list is empty")
    for index, item in enumerate(items):
        where = f" in item {index + 1}" if isinstance(value, list) else ""
        if not isinstance(item, dict):
            return CheckResult(status="failed", detail=f"not a JSON object{where}")
        missing = [name for name in fields if name not in item]
        if missing:
            return CheckResult(
                status="failed", detail=f"missing field {', '.join(map(repr, missing))}{where}"
            )
    return CheckResult(status="passed")


def check_regex(text: str, pattern: str, timeout_s: float = REGEX_TIMEOUT_S) -> CheckResult:
    """Whether ``pattern`` matches somewhere in the response; 'timeout' when the search runs
    over ``timeout_s`` (catastrophic backtracking), 'error' when the pattern does not compile.

    Blocking for up to about ``timeout_s``: async code calls it in a thread (`run_checker`).
    """
    try:
        found = regex.search(pattern, text, regex.MULTILINE, timeout=timeout_s, concurrent=True)
    except TimeoutError:
        return CheckResult(
            status="timeout",
            detail=f"regex /{pattern}/ ran over {timeout_s:g} s (does it backtrack?)",
        )
    except regex.error as error:
        return CheckResult(status="error", detail=f"regex /{pattern}/ does not compile: {error}")
    if found:
        return CheckResult(status="passed")
    return CheckResult(status="failed", detail=f"no match for /{pattern}/")


async def check_python(snippet: str, text: str, timeout_s: float) -> CheckResult:
    """Run ``snippet`` with ``response = text`` in a fresh, isolated interpreter."""
    payload = json.dumps({"snippet": snippet, "response": text}).encode()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # isolated: no user site, no PYTHON* variables, no cwd on sys.path
            "-c",
            _HARNESS,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        return CheckResult(status="error", detail=f"cannot start the checker: {error}")
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(payload), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return CheckResult(status="timeout", detail=f"checker ran over {timeout_s:g} s")
    finally:
        if proc.returncode is None:  # cancelled: the checker must not outlive the comparison
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    lines = stderr.decode(errors="replace").strip().splitlines()
    detail = lines[-1] if lines else ""
    if proc.returncode == 0:
        return CheckResult(status="passed")
    if proc.returncode == 1:
        return CheckResult(status="failed", detail=f"assert failed: {detail}")
    return CheckResult(status="error", detail=f"checker raised {detail or proc.returncode}")


async def run_checker(checker: Checker, text: str, *, trust_code: bool = True) -> CheckResult:
    """Every part of ``checker`` on ``text``; the first part that does not pass decides.

    Without ``trust_code`` the Python part does not run: 'skipped' if the rest passed.
    """
    if checker.json_fields:
        result = check_json_fields(text, checker.json_fields)
        if not result.passed:
            return result
    if checker.regex is not None:
        result = await asyncio.to_thread(check_regex, text, checker.regex)
        if not result.passed:
            return result
    if checker.python is not None:
        if not trust_code:
            return CheckResult(status="skipped", detail="python checker not run (untrusted code)")
        return await check_python(checker.python, text, checker.timeout_s)
    return CheckResult(status="passed")

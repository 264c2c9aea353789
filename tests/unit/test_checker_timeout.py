"""A regex checker from an untrusted results file cannot hang a comparison: catastrophic
backtracking ends in a 'timeout' verdict that says so (the test asserts it returns, not how
fast)."""

from __future__ import annotations

import pytest

from spectui.core.compare.checkers import Checker, check_regex, run_checker


@pytest.mark.parametrize(
    ("pattern", "text"), [(r"(x+x+)+y", "x" * 5000), (r"(a|aa)+$", "a" * 80 + "!")]
)
def test_catastrophic_regex_times_out_with_a_clear_verdict(pattern: str, text: str) -> None:
    result = check_regex(text, pattern, timeout_s=0.2)
    assert result.status == "timeout"
    assert pattern in result.detail and "0.2 s" in result.detail


async def test_run_checker_returns_timeout_and_other_checks_still_run() -> None:
    checker = Checker(regex=r"(x+x+)+y")
    result = await run_checker(checker, "x" * 5000, trust_code=False)
    assert result.status == "timeout" and not result.passed
    assert (await run_checker(Checker(regex=r"INV-\d+"), "no. INV-2291")).passed
    assert (await run_checker(Checker(regex="^b"), "a\nb")).passed  # still multiline


def test_a_pattern_that_does_not_compile_is_refused_when_loaded() -> None:
    with pytest.raises(ValueError, match="does not compile"):
        Checker(regex="(unclosed")

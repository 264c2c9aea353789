"""The content classifier and prompt-length buckets: the documented rules, and bounded labels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectui.core.content import ContentClass, LengthBucket, classify, length_bucket
from spectui.core.prompts import builtin_prompt

JSON_ANSWER = '[\n  {"name": "Ann", "age": 31},\n  {"name": "Bo", "age": 25},\n  {"name": "Cy"'


@pytest.mark.parametrize(
    ("prompt", "answer", "expected"),
    [
        (builtin_prompt("code-edit").text, "", ContentClass.CODE),
        (builtin_prompt("table-row").text, "", ContentClass.OTHER),
        (builtin_prompt("essay").text, "", ContentClass.PROSE),
        (builtin_prompt("json-rewrite").text, "", ContentClass.PROSE),
        (builtin_prompt("json-rewrite").text, JSON_ANSWER, ContentClass.JSON),
        ('{"a": [1, 2, 3], "b": {"c": null}}', "", ContentClass.JSON),
        ('Fix this:\n```json\n{"a": 1,}\n```', "", ContentClass.JSON),
        ("Why does this fail?\n```python\nprint(x)\n```", "", ContentClass.CODE),
        ("function f(x) {\n  return x + 1;\n}\nconst y = f(2);", "", ContentClass.CODE),
        ("Tell me a story.", "def f():\n    return 1\n\nprint(f())", ContentClass.CODE),
        ("Tell me a story about the sea.", "Once upon a time, a ship sailed.", ContentClass.PROSE),
        ("hi", "", ContentClass.OTHER),
        (
            "2024-01-01 12:00:01 ERROR 0x1f=13\n2024-01-01 12:00:02 WARN 0x2a=99",
            "",
            ContentClass.OTHER,
        ),
    ],
)
def test_classes_follow_the_documented_rules(
    prompt: str, answer: str, expected: ContentClass
) -> None:
    assert classify(prompt, answer) is expected


@given(st.text(max_size=400), st.text(max_size=200))
def test_any_text_gets_one_of_the_four_classes(prompt: str, answer: str) -> None:
    assert classify(prompt, answer) in set(ContentClass)


@pytest.mark.parametrize(
    ("tokens", "bucket"),
    [
        (None, LengthBucket.UNKNOWN),
        (-1, LengthBucket.UNKNOWN),
        (0, LengthBucket.XS),
        (127, LengthBucket.XS),
        (128, LengthBucket.S),
        (511, LengthBucket.S),
        (512, LengthBucket.M),
        (2047, LengthBucket.M),
        (2048, LengthBucket.L),
        (8191, LengthBucket.L),
        (8192, LengthBucket.XL),
        (10**9, LengthBucket.XL),
    ],
)
def test_length_buckets_have_fixed_edges(tokens: int | None, bucket: LengthBucket) -> None:
    assert length_bucket(tokens) is bucket

"""A secret on the server's command line never reaches a results file; --resume takes it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.engines import FakeSetup
from spectui.core.compare.store import (
    CompareDocument,
    ResultFileError,
    ServerOptions,
    dump_document,
    load_document,
    write_atomic,
)

from .compare_helpers import plan

SECRET_ARGS = ["--hf-token", "hf_SECRET1", "--api-key=SECRET2", "--threads", "2"]


def saved(tmp_path: Path, extra: list[str]) -> tuple[Path, CompareDocument]:
    setup = FakeSetup()
    document = CompareDocument.new(
        plan(),
        binary=setup.binary_info,
        model=setup.model_info,
        server=ServerOptions(ctx_size=1024, extra_args=extra),
    )
    path = tmp_path / "results.json"
    write_atomic(path, dump_document(document))
    return path, document


def test_the_file_holds_no_secret_but_memory_keeps_them(tmp_path: Path) -> None:
    path, document = saved(tmp_path, SECRET_ARGS)
    text = path.read_text()
    assert "SECRET" not in text
    assert document.server.extra_args == SECRET_ARGS  # the running comparison launches with them
    assert load_document(path).server.extra_args == [
        "--hf-token",
        "***",
        "--api-key=***",
        "--threads",
        "2",
    ]


def test_resume_takes_the_secrets_from_the_same_arguments(tmp_path: Path) -> None:
    path, _ = saved(tmp_path, SECRET_ARGS)
    restored = load_document(path).server.with_secrets(
        ["--hf-token", "hf_NEW", *SECRET_ARGS[2:]], path
    )
    assert restored.extra_args == ["--hf-token", "hf_NEW", *SECRET_ARGS[2:]]


@pytest.mark.parametrize(
    "given",
    [[], ["--threads", "2"], ["--hf-token", "x", "--api-key=y", "--threads", "4"]],
)
def test_resume_without_the_same_secret_arguments_is_one_line(
    tmp_path: Path, given: list[str]
) -> None:
    path, _ = saved(tmp_path, SECRET_ARGS)
    with pytest.raises(ResultFileError) as caught:
        load_document(path).server.with_secrets(given, path)
    message = str(caught.value)
    assert "\n" not in message and "SECRET" not in message
    assert "--hf-token ***" in message and str(path) in message


def test_arguments_without_secrets_resume_as_stored(tmp_path: Path) -> None:
    path, _ = saved(tmp_path, ["--threads", "2"])
    server = load_document(path).server
    assert server.with_secrets([], path).extra_args == ["--threads", "2"]

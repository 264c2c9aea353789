"""check_gguf: one clear line for every way a model path can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.core.errors import ModelError
from spectui.core.llama.gguf import check_gguf


def _file(tmp_path: Path, content: bytes, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_gguf_passes(tmp_path: Path) -> None:
    check_gguf(_file(tmp_path, b"GGUF\x03\x00\x00\x00" + bytes(64)))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty, not a GGUF file"),
        (b"GG", "only 2 bytes long"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\n", "Git LFS pointer"),
        (b"lmgg\x01\x00\x00\x00" + bytes(16), "old GGML file"),
        (b"PK\x03\x04" + bytes(16), "zip archive"),
        (b"<!DOCTYPE html><html>", "HTML page"),
        (b'\x10\x00\x00\x00\x00\x00\x00\x00{"a":1}', "safetensors"),
        (b"\x00\x01\x02\x03\x04\x05", r"starts with b'\\x00\\x01\\x02\\x03', not b'GGUF'"),
    ],
)
def test_not_a_gguf_says_what_it_looks_like(tmp_path: Path, content: bytes, message: str) -> None:
    path = _file(tmp_path, content)
    with pytest.raises(ModelError, match=message) as caught:
        check_gguf(path)
    assert str(caught.value).startswith(f"model {path}: ")
    assert "\n" not in str(caught.value)


def test_missing_file_names_what_it_is(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match=f"^draft model {missing}: no such file$"):
        check_gguf(missing, what="draft model")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="is a directory"):
        check_gguf(tmp_path)


def test_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, b"GGUF")

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    # chmod cannot make a file unreadable for root (as tests may run), so fail the open instead.
    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(ModelError, match="cannot be read \\(permission denied\\)"):
        check_gguf(path)


def test_model_error_exit_code() -> None:
    assert ModelError("x").exit_code == 2

"""Check that a model file is a GGUF before llama-server spends a launch finding out it is not."""

from __future__ import annotations

from pathlib import Path

from spectui.core.errors import ModelError

GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""

# What a wrong file commonly turns out to be, by its first bytes; one cheap read tells the user
# what to do instead of a bare "not a GGUF".
_LOOKS_LIKE: tuple[tuple[bytes, str], ...] = (
    (b"version https://git-lfs", "a Git LFS pointer, not the model itself (run git lfs pull)"),
    (b"lmgg", "an old GGML file (convert it to GGUF)"),
    (b"fmgg", "an old GGMF file (convert it to GGUF)"),
    (b"tjgg", "an old GGJT file (convert it to GGUF)"),
    (b"PK\x03\x04", "a zip archive (a PyTorch checkpoint?), not a GGUF"),
    (b"\x1f\x8b", "a gzip archive, not a GGUF"),
    (b"<!DOCTYPE", "an HTML page (a failed download?), not a GGUF"),
    (b"<html", "an HTML page (a failed download?), not a GGUF"),
    (b"{", "a JSON file, not a GGUF"),
)


def _describe(head: bytes) -> str:
    if not head:
        return "is empty, not a GGUF file"
    if len(head) < len(GGUF_MAGIC):
        return f"is only {len(head)} bytes long, not a GGUF file"
    for prefix, what in _LOOKS_LIKE:
        if head.lstrip().lower().startswith(prefix.lower()):
            return f"looks like {what}"
    # safetensors: an 8-byte little-endian header length, then a JSON header.
    if head[8:9] == b"{":
        return "looks like a safetensors file, not a GGUF (convert it to GGUF)"
    return f"is not a GGUF file (it starts with {head[:4]!r}, not {GGUF_MAGIC!r})"


def check_gguf(path: Path, what: str = "model") -> None:
    """Raise `ModelError` (one line naming ``what`` and ``path``) unless ``path`` is a GGUF file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(32)
    except FileNotFoundError:
        raise ModelError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ModelError(f"{what} {path}: is a directory, not a GGUF file") from None
    except PermissionError:
        raise ModelError(f"{what} {path}: cannot be read (permission denied)") from None
    except OSError as error:
        raise ModelError(f"{what} {path}: cannot be read ({error.strerror or error})") from None
    if not head.startswith(GGUF_MAGIC):
        raise ModelError(f"{what} {path}: {_describe(head)}")

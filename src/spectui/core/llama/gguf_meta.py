"""Read a GGUF file's metadata (its key/value header) without loading any tensor.

Enough to answer the questions spectui asks of a model before a launch: its architecture, and
whether it carries multi-token-prediction (MTP, "next-n") layers that ``draft-mtp`` drafts with.
Arrays (the tokenizer's 262k-entry vocabulary) are skipped, not kept.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from spectui.core.errors import ModelError
from spectui.core.llama.gguf import GGUF_MAGIC

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9

Scalar = int | float | bool | str


def _read(handle: BinaryIO, size: int) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _string(handle: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(handle, 8))
    return _read(handle, length).decode("utf-8", errors="replace")


def _value(handle: BinaryIO, kind: int) -> Scalar | None:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        value: Scalar = struct.unpack(fmt, _read(handle, struct.calcsize(fmt)))[0]
        return value
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item, count = struct.unpack("<IQ", _read(handle, 12))
        if item in _SCALARS:
            handle.seek(struct.calcsize(_SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _value(handle, item)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(path: Path) -> dict[str, Scalar]:
    """The scalar and string metadata of a GGUF file (arrays left out).

    Raises `ModelError` (one line) when the file cannot be read or is not a GGUF.
    """
    try:
        with path.open("rb") as handle:
            if _read(handle, 4) != GGUF_MAGIC:
                raise ModelError(f"model {path}: not a GGUF file")
            _version, _tensors, count = struct.unpack("<IQQ", _read(handle, 20))
            out: dict[str, Scalar] = {}
            for _ in range(count):
                key = _string(handle)
                (kind,) = struct.unpack("<I", _read(handle, 4))
                value = _value(handle, kind)
                if value is not None:
                    out[key] = value
            return out
    except OSError as error:
        raise ModelError(f"model {path}: cannot be read ({error.strerror or error})") from None
    except (EOFError, ValueError, struct.error):
        raise ModelError(f"model {path}: its GGUF header is damaged or truncated") from None


def architecture(metadata: dict[str, Scalar]) -> str:
    """'gemma3', 'llama', ... ('' when the file does not say)."""
    return str(metadata.get("general.architecture", ""))


def mtp_layers(metadata: dict[str, Scalar]) -> int:
    """How many MTP / next-n prediction layers the model has (0: none, draft-mtp cannot run)."""
    arch = architecture(metadata)
    for key in (f"{arch}.nextn_predict_layers", f"{arch}.mtp_layers"):
        value = metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0

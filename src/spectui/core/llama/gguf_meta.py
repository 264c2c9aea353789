"""Read a GGUF file's header (its key/value metadata and tensor names) without loading a tensor.

Enough to answer the questions spectui asks of a model before a launch: its architecture,
whether it carries multi-token-prediction (MTP, "next-n") layers that ``draft-mtp`` drafts with,
and what kind of drafter a draft GGUF is (EAGLE-3, DFlash, DSpark). Arrays (the tokenizer's
262k-entry vocabulary) are skipped, only their lengths kept.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict

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


_LONGEST_STRING = 1 << 24
"""No key or value of a real header is this long; a damaged length must not allocate it."""


def _string(handle: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(handle, 8))
    if length > _LONGEST_STRING:
        raise ValueError("implausible string length")
    return _read(handle, length).decode("utf-8", errors="replace")


def _skip_string(handle: BinaryIO) -> None:
    (length,) = struct.unpack("<Q", _read(handle, 8))
    handle.seek(length, 1)


def _value(handle: BinaryIO, kind: int) -> Scalar | int | None:
    """A scalar or string value; for an array, its length (its items are skipped)."""
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
        elif item == _STRING:
            for _ in range(count):  # a vocabulary: seek past each string, never decode it
                _skip_string(handle)
        else:
            for _ in range(count):
                _value(handle, item)
        return int(count)
    raise ValueError(f"unknown GGUF value type {kind}")


class GgufHeader(BaseModel):
    """What a GGUF file's header holds, tensors not loaded."""

    model_config = ConfigDict(frozen=True)

    metadata: dict[str, Scalar]
    """Scalar and string key/values (arrays are in `array_lengths`)."""
    array_lengths: dict[str, int]
    """Each array key and its number of items (``eagle3.target_layers`` -> 3)."""
    tensor_names: frozenset[str]
    """Every tensor's name (``blk.2.nextn.eh_proj.weight``, ``markov_w1.weight``, ...)."""


def _header(path: Path, with_tensors: bool) -> GgufHeader:
    try:
        with path.open("rb") as handle:
            if _read(handle, 4) != GGUF_MAGIC:
                raise ModelError(f"model {path}: not a GGUF file")
            _version, tensors, count = struct.unpack("<IQQ", _read(handle, 20))
            out: dict[str, Scalar] = {}
            arrays: dict[str, int] = {}
            for _ in range(count):
                key = _string(handle)
                (kind,) = struct.unpack("<I", _read(handle, 4))
                value = _value(handle, kind)
                if kind == _ARRAY:
                    arrays[key] = int(value or 0)
                elif value is not None:
                    out[key] = value
            names: set[str] = set()
            for _ in range(tensors if with_tensors else 0):
                names.add(_string(handle))
                (dims,) = struct.unpack("<I", _read(handle, 4))
                handle.seek(8 * dims + 4 + 8, 1)  # the shape, the type, the data offset
            return GgufHeader(metadata=out, array_lengths=arrays, tensor_names=frozenset(names))
    except OSError as error:
        raise ModelError(f"model {path}: cannot be read ({error.strerror or error})") from None
    except (EOFError, ValueError, struct.error, UnicodeDecodeError):
        raise ModelError(f"model {path}: its GGUF header is damaged or truncated") from None


def gguf_metadata(path: Path) -> dict[str, Scalar]:
    """The scalar and string metadata of a GGUF file (arrays left out).

    Raises `ModelError` (one line) when the file cannot be read or is not a GGUF.
    """
    return _header(path, with_tensors=False).metadata


def gguf_header(path: Path) -> GgufHeader:
    """Metadata, array lengths and tensor names; `ModelError` (one line) as `gguf_metadata`."""
    try:
        stat = path.stat()
    except OSError as error:
        raise ModelError(f"model {path}: cannot be read ({error.strerror or error})") from None
    return _cached_header(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _cached_header(path: Path, _size: int, _mtime_ns: int) -> GgufHeader:
    # Keyed on size and mtime too: a model rewritten in place (a test's tiny GGUF) is read again.
    # Reading a large vocabulary's header takes a noticeable fraction of a second, and one launch
    # validates its spec several times.
    return _header(path, with_tensors=True)


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


class GgufFacts(BaseModel):
    """What spectui needs to know of a model (target or drafter) to say which spec types fit."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The file's name, for messages."""
    architecture: str
    """``general.architecture`` ('' when the file does not say)."""
    mtp_layers: int
    """``<arch>.nextn_predict_layers``: MTP layers (0: none)."""
    mtp_key: str
    """That key's name, so a message can say what it read."""
    nextn_tensors: bool
    """Whether the file holds ``blk.N.nextn.*`` tensors (an MTP head's weights)."""
    markov_head: bool
    """Whether it holds ``markov_w1.weight``: a DFlash-arch drafter with DSpark's Markov head."""
    target_layers: int | None
    """How many target layers a drafter reads (``<arch>.target_layers``; EAGLE-3 needs 3)."""


def facts_of(path: Path, header: GgufHeader) -> GgufFacts:
    """The facts of a header read from ``path``."""
    meta = {"general.architecture": "", **header.metadata}
    arch = architecture(meta)
    return GgufFacts(
        name=path.name,
        architecture=arch,
        mtp_layers=mtp_layers(meta),
        mtp_key=f"{arch}.nextn_predict_layers",
        nextn_tensors=any(".nextn." in name for name in header.tensor_names),
        markov_head="markov_w1.weight" in header.tensor_names,
        target_layers=header.array_lengths.get(f"{arch}.target_layers"),
    )


def gguf_facts(path: Path) -> GgufFacts:
    """`GgufFacts` of the GGUF at ``path``; `ModelError` (one line) when it cannot be read."""
    return facts_of(path, gguf_header(path))

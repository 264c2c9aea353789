"""Minimal GGUF headers written by hand: metadata, arrays and tensor names, no tensor data.

Enough for spectui's header reader (`gguf_meta`), which never reads a tensor; llama-server would
refuse these files.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

_U32, _STRING, _ARRAY, _BOOL = 4, 8, 9, 7


def _str(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value: object) -> bytes:
    if isinstance(value, bool):
        return _str(key) + struct.pack("<I?", _BOOL, value)
    if isinstance(value, int):
        return _str(key) + struct.pack("<II", _U32, value)
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", _STRING) + _str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = b"".join(_str(v) for v in value)
        return _str(key) + struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + items
    if isinstance(value, list):
        items = b"".join(struct.pack("<I", v) for v in value)
        return _str(key) + struct.pack("<IIQ", _ARRAY, _U32, len(value)) + items
    raise TypeError(value)


def write_gguf(path: Path, metadata: Mapping[str, object], tensors: Sequence[str] = ()) -> Path:
    """A GGUF v3 header with ``metadata`` (ints as u32, lists as arrays) and ``tensors``."""
    body = b"".join(_kv(k, v) for k, v in metadata.items())
    infos = b"".join(_str(name) + struct.pack("<IQIQ", 1, 4, 0, 0) for name in tensors)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)) + body + infos)
    return path


def target(path: Path, arch: str, mtp_layers: int | None = None) -> Path:
    """A target model's header: ``arch``, a vocabulary, and MTP layers when given."""
    meta: dict[str, object] = {
        "general.architecture": arch,
        f"{arch}.block_count": 3,
        "tokenizer.ggml.tokens": ["<s>", "a", "b"],
    }
    tensors = ["token_embd.weight", "blk.0.attn_q.weight"]
    if mtp_layers is not None:
        meta[f"{arch}.nextn_predict_layers"] = mtp_layers
        tensors += ["blk.2.nextn.eh_proj.weight"] if mtp_layers else []
    return write_gguf(path, meta, tensors)


def eagle3(path: Path, target_layers: int = 3) -> Path:
    """An EAGLE-3 drafter's header."""
    meta = {
        "general.architecture": "eagle3",
        "eagle3.target_layers": list(range(target_layers)),
        "eagle3.target_hidden_size": 64,
    }
    return write_gguf(path, meta, ["fc.weight", "blk.0.attn_q.weight"])


def dflash(path: Path, *, markov: bool) -> Path:
    """A DFlash drafter's header; with ``markov``, DSpark's Markov head."""
    meta = {"general.architecture": "dflash", "dflash.block_size": 4, "dflash.target_layers": [1]}
    tensors = ["fc.weight", "enc.output_norm.weight"] + (["markov_w1.weight"] if markov else [])
    return write_gguf(path, meta, tensors)

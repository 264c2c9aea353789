"""Writing one GGUF: keys and f32 tensors in a fixed order, so equal inputs give equal bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


class Weights:
    """Tensors by GGUF name, in insertion order, with a seeded generator for the random ones."""

    def __init__(self, seed: int) -> None:
        self.tensors: dict[str, F32] = {}
        self.rng = np.random.default_rng(seed)

    def add(self, name: str, value: F32) -> None:
        """Add a tensor given as numpy (rows = ggml's last dimension, as llama.cpp reads it)."""
        if name in self.tensors:
            raise ValueError(f"duplicate tensor {name}")
        self.tensors[name] = np.ascontiguousarray(value, dtype=np.float32)

    def ones(self, name: str, n: int) -> None:
        """A norm weight of ones."""
        self.add(name, np.ones(n, dtype=np.float32))

    def random(self, name: str, shape: tuple[int, ...], std: float) -> None:
        """A normal random tensor (the seeded generator: the same every build)."""
        self.add(name, (self.rng.standard_normal(shape) * std).astype(np.float32))


def write_gguf(
    path: Path, arch: str, keys: Callable[[gguf.GGUFWriter], None], weights: Weights
) -> Path:
    """Write `path` (parents created): general keys, `keys(writer)`, then the tensors."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"spectui tiny {arch}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    keys(writer)
    for name, value in weights.tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

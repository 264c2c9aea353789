"""The tiny qwen35 target: greedy output is the word cycle, with one optional MTP layer.

Layer 0 is a gated-delta-net (linear attention) block, layer 1 a full-attention block (qwen35's
`full_attention_interval` 2), layer 2 the MTP block when there is one. Every block's output
projection is small and random, so every layer really runs while the residual stream stays the
token's one-hot embedding; `output` maps word k to word k+1. The MTP head's `eh_proj` keeps the
token-embedding half of its input, so it predicts what the target will say next (acceptance 100 %),
unless its own `shared_head_head` is wrong after chosen words (a deterministic part) or all its
weights are random and its head only names byte tokens (acceptance 0 %, byte-fallback drafts).
Facts from llama.cpp's `src/models/qwen35.cpp` (see ../shared/notes/tiny-spec-models.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import gguf
import numpy as np

from spectui.testing.gguf_out import Weights, write_gguf
from spectui.testing.tiny_vocab import (
    BYTE_BASE,
    N_EMBD,
    N_WORDS,
    add_tokenizer,
    successor_head,
    token_embeddings,
    vocab,
)

Acceptance = Literal["full", "partial", "zero"]

ARCH = "qwen35"
N_TRUNK = 2
N_HEAD = 2
HEAD_DIM = 32
N_FF = 64
N_ROT = 16
ROPE_SECTIONS = (3, 3, 2, 0)  # sums to N_ROT / 2 (interleaved M-RoPE, text positions only)
CONTEXT = 4096
SSM_CONV = 4
SSM_STATE = 16  # head_k_dim = head_v_dim
SSM_GROUPS = 2  # key heads
SSM_RANK = 2  # value heads
SMALL = 1e-2
"""Std of every block's output projection: the block runs, the residual stays the embedding."""

PARTIAL_WRONG = frozenset(k for k in range(N_WORDS) if k % 5 == 0)
"""Words after which the partial MTP head drafts the word after next (alpha, zeta, lambda, …):
prompt "Hello alpha beta", 40 tokens, n-max 2 n-min 1 → 32 drafted, 22 accepted, 16 steps."""

SEED = {"trunk": 11, "full": 12, "partial": 13, "zero": 14}


def _keys(writer: gguf.GGUFWriter, n_mtp: int) -> None:
    a = ARCH
    writer.add_uint32(f"{a}.context_length", CONTEXT)
    writer.add_uint32(f"{a}.embedding_length", N_EMBD)
    writer.add_uint32(f"{a}.block_count", N_TRUNK + n_mtp)
    if n_mtp:
        writer.add_uint32(f"{a}.nextn_predict_layers", n_mtp)
    writer.add_uint32(f"{a}.feed_forward_length", N_FF)
    writer.add_uint32(f"{a}.attention.head_count", N_HEAD)
    writer.add_uint32(f"{a}.attention.head_count_kv", N_HEAD)
    writer.add_uint32(f"{a}.attention.key_length", HEAD_DIM)
    writer.add_uint32(f"{a}.attention.value_length", HEAD_DIM)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_uint32(f"{a}.rope.dimension_count", N_ROT)
    writer.add_array(f"{a}.rope.dimension_sections", list(ROPE_SECTIONS))
    writer.add_float32(f"{a}.rope.freq_base", 10000.0)
    writer.add_uint32(f"{a}.full_attention_interval", 2)
    writer.add_uint32(f"{a}.ssm.conv_kernel", SSM_CONV)
    writer.add_uint32(f"{a}.ssm.state_size", SSM_STATE)
    writer.add_uint32(f"{a}.ssm.group_count", SSM_GROUPS)
    writer.add_uint32(f"{a}.ssm.time_step_rank", SSM_RANK)
    writer.add_uint32(f"{a}.ssm.inner_size", SSM_STATE * SSM_RANK)
    add_tokenizer(writer)


def _ffn(w: Weights, il: int, down_std: float) -> None:
    w.random(f"blk.{il}.ffn_gate.weight", (N_FF, N_EMBD), 0.1)
    w.random(f"blk.{il}.ffn_up.weight", (N_FF, N_EMBD), 0.1)
    w.random(f"blk.{il}.ffn_down.weight", (N_EMBD, N_FF), down_std)


def _linear_block(w: Weights, il: int) -> None:
    key_dim = SSM_STATE * SSM_GROUPS
    value_dim = SSM_STATE * SSM_RANK
    conv_dim = 2 * key_dim + value_dim
    w.ones(f"blk.{il}.attn_norm.weight", N_EMBD)
    w.ones(f"blk.{il}.post_attention_norm.weight", N_EMBD)
    w.random(f"blk.{il}.attn_qkv.weight", (conv_dim, N_EMBD), 0.1)
    w.random(f"blk.{il}.attn_gate.weight", (value_dim, N_EMBD), 0.1)
    w.random(f"blk.{il}.ssm_conv1d.weight", (conv_dim, SSM_CONV), 0.3)
    w.add(f"blk.{il}.ssm_dt.bias", np.zeros(SSM_RANK, dtype=np.float32))
    w.add(f"blk.{il}.ssm_a", np.full(SSM_RANK, -1.0, dtype=np.float32))
    w.random(f"blk.{il}.ssm_beta.weight", (SSM_RANK, N_EMBD), 0.1)
    w.random(f"blk.{il}.ssm_alpha.weight", (SSM_RANK, N_EMBD), 0.1)
    w.ones(f"blk.{il}.ssm_norm.weight", SSM_STATE)
    w.random(f"blk.{il}.ssm_out.weight", (N_EMBD, value_dim), SMALL)
    _ffn(w, il, SMALL)


def _attention_block(w: Weights, il: int, std: float = 0.1, out_std: float = SMALL) -> None:
    w.ones(f"blk.{il}.attn_norm.weight", N_EMBD)
    w.ones(f"blk.{il}.post_attention_norm.weight", N_EMBD)
    # qwen35's query projection carries the query and its output gate side by side
    w.random(f"blk.{il}.attn_q.weight", (2 * N_HEAD * HEAD_DIM, N_EMBD), std)
    w.random(f"blk.{il}.attn_k.weight", (N_HEAD * HEAD_DIM, N_EMBD), std)
    w.random(f"blk.{il}.attn_v.weight", (N_HEAD * HEAD_DIM, N_EMBD), std)
    w.random(f"blk.{il}.attn_output.weight", (N_EMBD, N_HEAD * HEAD_DIM), out_std)
    w.ones(f"blk.{il}.attn_q_norm.weight", HEAD_DIM)
    w.ones(f"blk.{il}.attn_k_norm.weight", HEAD_DIM)
    _ffn(w, il, out_std)


def _mtp_block(w: Weights, il: int, acceptance: Acceptance) -> None:
    if acceptance == "zero":
        # random everywhere: the head's input is noise, and only byte tokens have logits, so
        # every draft is a byte-fallback token the target never says
        _attention_block(w, il, std=0.5, out_std=0.5)
        w.random(f"blk.{il}.nextn.eh_proj.weight", (N_EMBD, 2 * N_EMBD), 0.3)
        w.ones(f"blk.{il}.nextn.enorm.weight", N_EMBD)
        w.ones(f"blk.{il}.nextn.hnorm.weight", N_EMBD)
        head = np.zeros((vocab().n_vocab, N_EMBD), dtype=np.float32)
        head[BYTE_BASE : BYTE_BASE + 256] = w.rng.standard_normal((256, N_EMBD))
        w.add(f"blk.{il}.nextn.shared_head_head.weight", head)
        return
    _attention_block(w, il)
    # [I | 0]: keep the embedding of the token just sampled, drop the target's hidden state
    eh = np.zeros((N_EMBD, 2 * N_EMBD), dtype=np.float32)
    eh[:, :N_EMBD] = np.eye(N_EMBD, dtype=np.float32)
    w.add(f"blk.{il}.nextn.eh_proj.weight", eh)
    w.ones(f"blk.{il}.nextn.enorm.weight", N_EMBD)
    w.ones(f"blk.{il}.nextn.hnorm.weight", N_EMBD)
    if acceptance == "partial":
        wrong = dict.fromkeys(PARTIAL_WRONG, 2)
        w.add(f"blk.{il}.nextn.shared_head_head.weight", successor_head(wrong))


def build_target(path: Path, mtp: Acceptance | None = "full") -> Path:
    """Write the tiny qwen35 target to `path`; `mtp` is its MTP head's acceptance, or None for
    no MTP layer at all (a plain target: `nextn_predict_layers` absent)."""
    w = Weights(SEED[mtp or "trunk"])
    w.add("token_embd.weight", token_embeddings())
    w.ones("output_norm.weight", N_EMBD)
    w.add("output.weight", successor_head())
    trunk = Weights(SEED["trunk"])  # the same trunk in every variant: only the head differs
    _linear_block(trunk, 0)
    _attention_block(trunk, 1)
    w.tensors.update(trunk.tensors)
    if mtp is not None:
        _mtp_block(w, N_TRUNK, mtp)
    return write_gguf(path, ARCH, lambda writer: _keys(writer, 1 if mtp else 0), w)

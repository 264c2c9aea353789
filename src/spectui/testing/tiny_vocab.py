"""The tiny models' shared vocabulary and embedding layout.

A SentencePiece ("llama") vocabulary with byte fallback: the special tokens, the 256 byte
tokens, 24 word tokens (" alpha" … " omega") with every "▁"-prefix of them (SentencePiece merges
only pairs it knows, so a word is reached only through its prefixes), and `<mask>` for the DFlash
drafters. Every model of the family carries the same vocabulary: llama-server refuses a drafter
whose token texts differ from its target's.

Embeddings are one-hot: word k is e_k, every other token shares `OTHER_DIM`. The constructed
heads of `tiny_target` and `tiny_drafters` read and write these dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import gguf
import numpy as np

from spectui.testing.gguf_out import F32

WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
)
"""The cycle the target speaks: after word k comes word k+1 (mod 24)."""

N_WORDS = len(WORDS)
OTHER_DIM = N_WORDS
"""The embedding dimension every non-word token (bytes, prefixes, specials, mask) shares."""

N_EMBD = 64
"""Hidden size of every tiny model (the drafters must equal the target's: they read its
hidden states and its token embeddings)."""

SPACE = "\u2581"  # SentencePiece's visible space
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
BYTE_BASE = 3
"""Token id of `<0x00>`; byte b is `BYTE_BASE + b`."""


@dataclass(frozen=True)
class Vocab:
    """Token texts, scores and types, and where the words and the mask sit."""

    tokens: tuple[str, ...]
    """Token text by id (SentencePiece spelling: "▁alpha")."""
    scores: tuple[float, ...]
    """Merge priority: longer pieces first, so a word always wins over its prefixes."""
    types: tuple[int, ...]
    """gguf.TokenType by id."""
    word_ids: tuple[int, ...]
    """Token id of word k."""
    mask_id: int
    """Token id of `<mask>` (the DFlash/DSpark noise token)."""

    @property
    def n_vocab(self) -> int:
        """Number of tokens."""
        return len(self.tokens)


@cache
def vocab() -> Vocab:
    """The one vocabulary of the tiny family (deterministic order)."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(gguf.TokenType.BYTE)
    word_ids = []
    for word in WORDS:
        word_ids.append(len(tokens))
        tokens.append(SPACE + word)
        types.append(gguf.TokenType.NORMAL)
    full = {SPACE + w for w in WORDS}
    prefixes = sorted(
        {SPACE + w[:n] for w in WORDS for n in range(len(w))} - full, key=lambda p: (len(p), p)
    )
    for prefix in prefixes:
        tokens.append(prefix)
        types.append(gguf.TokenType.NORMAL)
    mask_id = len(tokens)
    tokens.append("<mask>")
    types.append(gguf.TokenType.USER_DEFINED)
    normal = gguf.TokenType.NORMAL
    scores = [float(len(t)) if ty == normal else 0.0 for t, ty in zip(tokens, types, strict=True)]
    return Vocab(
        tokens=tuple(tokens),
        scores=tuple(scores),
        types=tuple(int(t) for t in types),
        word_ids=tuple(word_ids),
        mask_id=mask_id,
    )


def add_tokenizer(writer: gguf.GGUFWriter) -> None:
    """Write the vocabulary and its special tokens (identical in every model of the family)."""
    v = vocab()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(v.tokens))
    writer.add_token_scores(list(v.scores))
    writer.add_token_types(list(v.types))
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_mask_token_id(v.mask_id)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)


def token_embeddings(scale: float = 1.0) -> F32:
    """`token_embd.weight`, numpy (n_vocab, n_embd): word k → scale·e_k, others → scale·e_OTHER."""
    v = vocab()
    emb = np.zeros((v.n_vocab, N_EMBD), dtype=np.float32)
    emb[:, OTHER_DIM] = scale
    for k, tid in enumerate(v.word_ids):
        emb[tid, OTHER_DIM] = 0.0
        emb[tid, k] = scale
    return emb


def successor_head(shift: dict[int, int] | None = None, logit: float = 2.0) -> F32:
    """An lm head (n_vocab, n_embd) mapping e_k to word k+1, or to word k+shift[k] where given.

    `OTHER_DIM` maps to nothing (all logits equal): what follows a non-word is left undecided.
    """
    v = vocab()
    head = np.zeros((v.n_vocab, N_EMBD), dtype=np.float32)
    for k in range(N_WORDS):
        step = (shift or {}).get(k, 1)
        head[v.word_ids[(k + step) % N_WORDS], k] = logit
    return head

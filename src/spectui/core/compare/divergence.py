"""Why an answer changed: the baseline's own candidates at the first divergent token.

At temperature 0 the baseline takes the most likely token at every step. When a speculative
config's answer differs, the question is whether the baseline's choice there was a near-tie
(batched verification scores the same prefix through other kernels and can round a near-tie
the other way; llama.cpp reproduces such flips with no drafter at all, ggml-org/llama.cpp#25618)
or a real disagreement. One extra, untimed request answers it: the prompt plus the common prefix,
``n_predict`` 1, ``n_probs``, temperature 0, sent to a server running the baseline config. The
server's ``completion_probabilities`` give the softmax of the model's logits before sampling.

Classification (`classify`): **near-tie** when the baseline's top two candidates are within
`NEAR_TIE_MAX_LOGIT_GAP` of each other in logit (p1 / p2 ≤ e^0.3 ≈ 1.35, e.g. 0.41/0.40 or
0.40/0.30) and the response took one of those two; else **divergent**. The margin is a logit
gap, not a difference of probabilities: a numerical perturbation of the logits flips the argmax
only if it bridges the gap between the two logits, whatever mass the other tokens take (0.10 vs
0.04 differ by 0.06 but sit a whole logit apart). Why 0.3: the largest shift between sequential
and batched scoring measured on the project's model (Gemma 3 270M Q4_K_M, CPU) is 0.25 logit —
json-rewrite, token 18, where draft-simple flips the baseline's answer: sequential decoding has
'occupation' 0.092 over 'salary' 0.086 (gap 0.065), the batched probe 'salary' 0.089 over
'occupation' 0.074 (gap 0.18 the other way). A gap that numerics alone can bridge is a near-tie;
0.3 leaves a little room over what was seen, and stays well under a confident choice's gap.

The probe evaluates prompt + prefix as one batch: what it reports are the model's probabilities
there by batched scoring, which is itself one of the two numerics at play; a near-tie is a
near-tie either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import annotate, reference_text
from spectui.core.compare.textdiff import Divergence, DivergenceKind, TokenProb

NEAR_TIE_MAX_LOGIT_GAP = 0.3
"""Top two within this logit gap (p1 / p2 ≤ e^0.3 ≈ 1.35) is a near-tie (see the module doc)."""
TOP_CANDIDATES = 5
"""Candidates asked for and kept per probe."""
PROBE_TIMEOUT_S = 60.0
"""One probe re-reads the prompt and the prefix: seconds on a slow CPU, never minutes."""


class ProbeRequest(BaseModel):
    """What one probe asks: the next-token candidates after ``prompt`` + ``prefix``."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    """The prompt as the runs sent it."""
    prefix: str
    """The baseline's text up to the divergent token."""
    chat: bool = False
    """The runs used the chat endpoint (the prompt is a user message)."""

    @property
    def key(self) -> tuple[str, str, bool]:
        """Probes with the same key give the same answer (greedy, same server config)."""
        return self.prompt, self.prefix, self.chat


class Prober(Protocol):
    """Something that can ask a server running the baseline config for next-token candidates."""

    async def top_candidates(self, request: ProbeRequest) -> list[TokenProb]:
        """The most likely next tokens, most likely first; raises `ProbeError` on failure."""
        ...


class ProbeError(Exception):
    """A probe that got no usable answer (the message says why, in one line)."""


def parse_probabilities(body: object) -> list[TokenProb]:
    """The first generated token's candidates from a non-streamed ``/completion`` response.

    Current llama-server: ``completion_probabilities[0].top_logprobs[] = {token, logprob}``
    (``top_probs[] = {token, prob}`` with ``post_sampling_probs``); older builds:
    ``completion_probabilities[0].probs[] = {tok_str, prob}``.
    """
    if not isinstance(body, dict):
        raise ProbeError("the server's answer is not a JSON object")
    entries = body.get("completion_probabilities")
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict):
        raise ProbeError("the server's answer has no completion_probabilities (no n_probs?)")
    first: dict[str, Any] = entries[0]
    raw = first.get("top_logprobs", first.get("top_probs", first.get("probs")))
    if not isinstance(raw, list):
        raise ProbeError("completion_probabilities[0] lists no candidates")
    out: list[TokenProb] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        token = item.get("token", item.get("tok_str"))
        if "logprob" in item and isinstance(item["logprob"], int | float):
            prob = math.exp(item["logprob"])
        elif isinstance(item.get("prob"), int | float):
            prob = float(item["prob"])
        else:
            continue
        if isinstance(token, str):
            out.append(TokenProb(token=token, prob=min(max(prob, 0.0), 1.0)))
    if not out:
        raise ProbeError("completion_probabilities[0] lists no candidates")
    return sorted(out, key=lambda t: t.prob, reverse=True)[:TOP_CANDIDATES]


def classify(
    top: Sequence[TokenProb], baseline_token: str | None, response_token: str | None
) -> DivergenceKind:
    """near-tie or divergent (see the module doc). An unknown response token (no offsets, or
    the response ended there) is judged by the top two alone."""
    if len(top) < 2 or top[1].prob <= 0:
        return "divergent"
    if math.log(top[0].prob / top[1].prob) > NEAR_TIE_MAX_LOGIT_GAP:
        return "divergent"
    pair = {top[0].token, top[1].token}
    if response_token and response_token not in pair:
        return "divergent"  # the response took neither side of the tie
    if baseline_token and response_token and baseline_token not in pair:
        return "divergent"
    return "near-tie"


def with_evidence(divergence: Divergence, top: list[TokenProb]) -> Divergence:
    """``divergence`` with the baseline's candidates and its kind."""
    kind = classify(top, divergence.baseline_token, divergence.response_token)
    return divergence.model_copy(update={"baseline_top": top, "kind": kind, "probe_error": None})


def probe_request(plan: ComparePlan, record: RunRecord, baseline_text: str) -> ProbeRequest | None:
    """The probe for ``record``'s divergence (None when it has none, or no token offsets)."""
    d = record.divergence
    if d is None or d.token_start is None:
        return None
    return ProbeRequest(
        prompt=plan.prompt(record.prompt).text,
        prefix=baseline_text[: d.token_start],
        chat=plan.delivery.chat,
    )


def needs_probe(record: RunRecord) -> bool:
    """A counted changed answer whose divergence has no evidence yet (and no failed attempt);
    a warm-up's answer is not judged, so it is not probed."""
    d = record.divergence
    return (
        not record.warmup
        and record.identical_to_baseline is False
        and d is not None
        and d.token_start is not None
        and d.kind is None
        and d.probe_error is None
    )


Answer = list[TokenProb] | str
"""A probe's answer: the candidates, or why it failed."""


def _requests(
    plan: ComparePlan, records: Sequence[RunRecord], annotated: Sequence[RunRecord]
) -> list[ProbeRequest | None]:
    return [
        probe_request(plan, r, reference_text(plan, records, r)) if r.divergence else None
        for r in annotated
    ]


def pending(plan: ComparePlan, records: Sequence[RunRecord]) -> list[ProbeRequest]:
    """The probes the changed runs still need that no record's evidence answers (each once)."""
    annotated = annotate(plan, records)
    requests = _requests(plan, records, annotated)
    known = _known(annotated, requests)
    out: dict[tuple[str, str, bool], ProbeRequest] = {}
    for record, request in zip(annotated, requests, strict=True):
        if request is not None and needs_probe(record) and request.key not in known:
            out.setdefault(request.key, request)
    return list(out.values())


def _known(
    annotated: Sequence[RunRecord], requests: Sequence[ProbeRequest | None]
) -> dict[tuple[str, str, bool], Answer]:
    """Answers already in the records: the same prompt and prefix give the same candidates."""
    known: dict[tuple[str, str, bool], Answer] = {}
    for record, request in zip(annotated, requests, strict=True):
        d = record.divergence
        if request is not None and d is not None and d.baseline_top is not None:
            known.setdefault(request.key, d.baseline_top)
    return known


def explained(
    plan: ComparePlan, records: Sequence[RunRecord], answers: dict[tuple[str, str, bool], Answer]
) -> list[RunRecord]:
    """``records`` (same order) with each changed run's evidence, from ``answers`` or from
    another record's probe of the same prompt and prefix; the rest as they were."""
    annotated = annotate(plan, records)
    requests = _requests(plan, records, annotated)
    known = {**_known(annotated, requests), **answers}
    out = []
    for raw, record, request in zip(records, annotated, requests, strict=True):
        d = record.divergence
        answer = known.get(request.key) if request is not None else None
        if d is None or answer is None or not needs_probe(record):
            out.append(raw)
            continue
        d = (
            with_evidence(d, answer)
            if isinstance(answer, list)
            else d.model_copy(update={"probe_error": answer})
        )
        out.append(raw.model_copy(update={"divergence": d}))
    return out


class HttpProber:
    """Probes the llama-server at ``url()`` (read when probing: a restart may move it)."""

    def __init__(
        self,
        url: Callable[[], str],
        api_key: SecretStr | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        headers = {"Accept": "application/json"}
        if api_key is not None and api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self._headers = headers
        self._transport = transport

    async def _post(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
        try:
            response = await client.post(path, json=body)
        except httpx.HTTPError as error:
            raise ProbeError(f"{path}: {type(error).__name__}: {error}") from None
        if response.status_code != 200:
            raise ProbeError(f"{path}: HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise ProbeError(f"{path}: the answer is not JSON") from None

    async def _tokens(self, client: httpx.AsyncClient, text: str, special: bool) -> list[int]:
        body = await self._post(client, "/tokenize", {"content": text, "add_special": special})
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ProbeError("/tokenize: no token list in the answer")
        return tokens

    async def prompt_tokens(self, prompt: str, chat: bool = False) -> list[int]:
        """The prompt's token ids as the runs' server read them (chat: templated first)."""
        async with self._client() as client:
            return await self._prompt(client, prompt, chat)

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self._url(),
            headers=self._headers,
            timeout=PROBE_TIMEOUT_S,
            transport=self._transport,
        )

    async def _prompt(self, client: httpx.AsyncClient, prompt: str, chat: bool) -> list[int]:
        if chat:
            messages = [{"role": "user", "content": prompt}]
            body = await self._post(client, "/apply-template", {"messages": messages})
            if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
                raise ProbeError("/apply-template: no prompt in the answer")
            prompt = body["prompt"]
        return await self._tokens(client, prompt, special=not chat)

    async def top_candidates(self, request: ProbeRequest) -> list[TokenProb]:
        """Ask the server (prompt and prefix tokenised apart, as the run saw them)."""
        async with self._client() as client:
            # Tokenised apart: the prompt's last token and the answer's first are separate
            # tokens in the run, and one string might merge them ("JSON:\n" + "[").
            tokens = await self._prompt(client, request.prompt, request.chat)
            if request.prefix:
                tokens += await self._tokens(client, request.prefix, special=False)
            answer = await self._post(
                client,
                "/completion",
                {
                    "prompt": tokens,
                    "n_predict": 1,
                    "n_probs": TOP_CANDIDATES,
                    "temperature": 0,
                    "stream": False,
                    "cache_prompt": False,
                },
            )
        return parse_probabilities(answer)

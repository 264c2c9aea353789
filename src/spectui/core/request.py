"""What to generate: the sampling options shared by settings, compare plans and requests, and the
one request built from them plus a prompt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_N_PREDICT = 256
"""Tokens to generate when neither the user nor the prompt says how many."""


class Sampling(BaseModel):
    """How every run generates: everything a request carries besides its prompt.

    The settings hold one (from flags, SPECTUI_* and the settings file), a compare plan holds one
    for all its runs, and `request` is the single place a prompt is turned into a request.
    """

    model_config = ConfigDict(frozen=True)

    n_predict: int | None = Field(default=None, ge=1)
    """Maximum tokens to generate; None: the prompt's own length (built-in prompts), else 256."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature; 0 is greedy (outputs comparable across spec configs)."""
    seed: int = 42
    """Sampling seed."""
    top_k: int | None = Field(default=None, ge=0)
    """Top-k sampling (the server's default when None; 0 turns it off)."""
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    """Top-p sampling (the server's default when None; 1 turns it off)."""
    chat: bool = False
    """Use /v1/chat/completions (the model's chat template) instead of raw /completion."""
    cache_prompt: bool = False
    """Let the server reuse its prompt cache (off: every run pays the full prompt; fairer)."""
    stall_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds without a byte from the server before the run is declared stalled."""

    def request(self, prompt: str, own_n_predict: int | None = None) -> GenerationRequest:
        """The request for ``prompt``: an explicit n_predict wins over the prompt's own."""
        n_predict = self.n_predict or own_n_predict or DEFAULT_N_PREDICT
        return GenerationRequest(
            **self.model_dump(exclude={"n_predict"}), prompt=prompt, n_predict=n_predict
        )


class GenerationRequest(Sampling):
    """One generation request; the same object drives live runs, compare runs and recordings."""

    prompt: str
    """The prompt text (raw for /completion, the user message for chat)."""
    n_predict: int = Field(default=DEFAULT_N_PREDICT, ge=1)
    """Maximum tokens to generate."""

    @property
    def endpoint(self) -> str:
        """Path of the endpoint this request streams from."""
        return "/v1/chat/completions" if self.chat else "/completion"

    def payload(self) -> dict[str, Any]:
        """JSON body for the endpoint."""
        body: dict[str, Any] = {
            "stream": True,
            "timings_per_token": True,
            "return_progress": True,
            "n_predict": self.n_predict,
            "temperature": self.temperature,
            "seed": self.seed,
            "cache_prompt": self.cache_prompt,
        }
        if self.top_k is not None:
            body["top_k"] = self.top_k
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.chat:
            body["messages"] = [{"role": "user", "content": self.prompt}]
            body["max_tokens"] = self.n_predict
        else:
            body["prompt"] = self.prompt
            body["return_tokens"] = True
        return body

"""What to generate and how to ask for it: the sampling options and the delivery options shared by
settings, compare plans and requests, and the one request built from them plus a prompt.

How long a run waits for the server (the stall watchdog) is neither: it is the client's, and the
stream runner takes it (`StreamRun`'s ``stall_timeout_s``, through the engine).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_N_PREDICT = 256
"""Tokens to generate when neither the user nor the prompt says how many."""


class Sampling(BaseModel):
    """How the server picks the tokens of every run, and how many it generates.

    The settings hold one (from flags, SPECTUI_* and the settings file), a compare plan holds one
    for all its runs, and `GenerationRequest.build` turns it and a prompt into a request.
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


class Delivery(BaseModel):
    """How a request is put to the server, besides what it samples: through which endpoint, and
    whether the server may start from its prompt cache. Neither changes how a token is picked;
    both change what a run costs, so a compare plan fixes them like its sampling."""

    model_config = ConfigDict(frozen=True)

    chat: bool = False
    """Use /v1/chat/completions (the model's chat template) instead of raw /completion."""
    cache_prompt: bool = False
    """Let the server reuse its prompt cache (off: every run pays the full prompt; fairer)."""


class GenerationRequest(Delivery, Sampling):
    """One generation request; the same object drives live runs, compare runs and recordings."""

    prompt: str
    """The prompt text (raw for /completion, the user message for chat)."""
    n_predict: int = Field(default=DEFAULT_N_PREDICT, ge=1)
    """Maximum tokens to generate."""

    @classmethod
    def build(
        cls,
        prompt: str,
        sampling: Sampling,
        delivery: Delivery,
        own_n_predict: int | None = None,
    ) -> GenerationRequest:
        """The request for ``prompt``: an explicit n_predict wins over the prompt's own."""
        n_predict = sampling.n_predict or own_n_predict or DEFAULT_N_PREDICT
        return cls(
            **sampling.model_dump(exclude={"n_predict"}),
            **delivery.model_dump(),
            prompt=prompt,
            n_predict=n_predict,
        )

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

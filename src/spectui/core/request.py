"""What to generate: the prompt and sampling parameters of one run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GenerationRequest(BaseModel):
    """One generation request; the same object drives live runs, compare runs and recordings."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    """The prompt text (raw for /completion, the user message for chat)."""
    chat: bool = False
    """Use /v1/chat/completions (the model's chat template) instead of raw /completion."""
    n_predict: int = Field(default=256, ge=1)
    """Maximum tokens to generate."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature; 0 is greedy (outputs comparable across spec configs)."""
    seed: int = 42
    """Sampling seed."""
    top_k: int | None = None
    """Top-k sampling (server default when None)."""
    top_p: float | None = None
    """Top-p sampling (server default when None)."""
    cache_prompt: bool = False
    """Let the server reuse its prompt cache (off: every run pays the full prompt; fairer)."""
    stall_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds without a byte from the server before the run is declared stalled."""

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

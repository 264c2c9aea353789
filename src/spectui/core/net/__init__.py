"""spectui's own socket work: one buffered asyncio protocol (`buffered`), the hop-by-hop rules of
an HTTP intermediary (`headers`) and the ASGI side of a proxied request (`asgi`). No UI, no
settings; the layers above (`llama.transport`, `proxy`) build on it."""

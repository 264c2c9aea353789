"""spectui's own socket work: one buffered asyncio protocol (`buffered`), the hop-by-hop rules of
an HTTP intermediary (`headers`), the ASGI side of a proxied request (`asgi`) and a response body
read whole per socket read (`per_read`). No UI, no settings; the layers above (`llama.transport`,
`stream`, `proxy`) build on it."""

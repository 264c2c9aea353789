"""Watching a real workload: `app` (the proxy, an ASGI app that passes every request through to a
llama-server and attributes each streamed generation token by token), `watch` (polls /slots and
/metrics, sends nothing), and what both report (`models`).

May import what lies below it in the engine's layers (`compare`, `sessions`, `engine`, `stream`,
`llama`, the shared core modules); never `tune`, its sibling at the top.
"""

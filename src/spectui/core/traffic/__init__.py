"""Watching a real workload: `proxy` (an ASGI app that passes every request through to a
llama-server and attributes each streamed generation token by token), `watch` (polls /slots and
/metrics, sends nothing), and what both report (`models`).

May import `sessions`, `engine`, `stream`, `llama` and the shared core modules; never `compare`.
"""

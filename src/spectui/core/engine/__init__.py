"""The engine a UI or headless command programs against: the `Engine` protocol (`base`) and
`LiveEngine` (`live`), one real llama-server plus streamed runs as typed events.

May import `llama`, `stream` and the shared core modules; never `sessions` or `compare`.
"""

"""Recorded sessions: the JSONL session file format (`file`), an engine wrapper that records runs
(`recording`) and an engine that replays a file with the live metrics code (`replay`).

May import `engine`, `stream`, `llama` and the shared core modules; never `compare`.
"""

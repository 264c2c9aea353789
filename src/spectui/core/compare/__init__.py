"""Fair A/B comparison of spec configs: the plan and run records (`models`), the runner, the
incremental JSON store, verdicts, exports, answer checkers and prompt files.

May import `sessions`, `engine`, `stream`, `llama` and the shared core modules.
"""

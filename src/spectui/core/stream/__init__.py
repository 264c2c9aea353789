"""One streamed generation: SSE chunks are parsed, attributed to draft or target token by token,
and folded into live metrics.

May import `spectui.core.llama` and the shared core modules; nothing above.
"""

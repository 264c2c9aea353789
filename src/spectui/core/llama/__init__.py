"""llama-server itself: finding the binary and its `--help` capabilities, spec configs, launching,
stopping and attaching to servers, the HTTP client and the JSON shapes it speaks, process memory.

Imports only the shared core modules (`errors`, `events`, ...); never `stream`, `engine`,
`sessions` or `compare`.
"""

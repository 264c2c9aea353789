"""What every kind of test shares: waiting on a condition (`wait`), running `spectui` as a
process (`cli`), the proxy on a loopback port (`proxy`), the fake engines (`engines`), the
recorded server captures (`sse`), hand-written GGUF headers (`gguf_files`) and what every test
server is started with (`servers`).

A package of helpers, not of tests: test modules import from here (or get fixtures from a
conftest.py), never from another test module, nor from another test folder's helper modules
(tests/unit/test_test_imports.py checks both).
"""

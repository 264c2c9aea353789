"""What every kind of test shares: waiting on a condition (`wait`), running `spectui` as a
process (`cli`), the proxy on a loopback port (`proxy`).

A package of helpers, not of tests: test modules import from here (or get fixtures from a
conftest.py), never from another test module (tests/unit/test_test_imports.py checks it).
"""

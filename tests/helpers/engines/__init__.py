"""The fake engines every kind of test shares, in one place (no server, no network):

* `FakeEngine` (`seeded`): seeded, synthetic runs for the TUI tests and tmux tries, with knobs
  for failing starts, crashes, gates and refusals;
* `CaptureEngine` (`capture`): a recorded SSE capture streamed through the real `StreamRun`
  (mock transport, a step clock, `FakeMemory`), and `record_capture` to write it as a session;
* `ScriptedEngine` (`scripted`): scripted answers and speeds per spec type for compare and tune,
  handed out by `FakeSetup`, the `CompareSetup` stand-in.

A variant only one test module needs stays a subclass in that module; one that several share
lives here (tests/unit/test_test_imports.py checks that no engine is imported from elsewhere).
"""

from .capture import REQUEST, CaptureEngine, FakeMemory, StepClock, record_capture
from .scripted import FakeSetup, ScriptedEngine, words
from .seeded import PASSAGE, SPEC_TYPES, FakeEngine, split_tokens

__all__ = [
    "PASSAGE",
    "REQUEST",
    "SPEC_TYPES",
    "CaptureEngine",
    "FakeEngine",
    "FakeMemory",
    "FakeSetup",
    "ScriptedEngine",
    "StepClock",
    "record_capture",
    "split_tokens",
    "words",
]

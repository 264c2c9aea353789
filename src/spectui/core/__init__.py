"""The engine: everything spectui does without a screen.

Subpackages, lowest layer first (each may import only from the layers below it and from the
shared top-level modules `errors`, `events`, `request`, `prompts`):

- `drafters`  — replicas of llama-server's n-gram drafters (imports no other spectui module);
  which drafter of a chain made each step.
- `llama`     — the llama-server binary, its processes, HTTP client and wire protocol.
- `stream`    — one streamed generation: SSE chunks -> attributed tokens -> metrics.
- `engine`    — the `Engine` protocol and the live engine over a real server.
- `sessions`  — recorded session files: writing them, replaying them.
- `compare`   — fair A/B runs of spec configs, their store, exports and verdicts.
- `tune`      — searching this binary's spec configs under the compare rules.
- `proxy`     — `spectui proxy` and `spectui watch`: a real workload, request by request.

`tune` and `proxy` sit side by side at the top and never import each other. Never imports
textual, the UI, the commands or the app's settings module: it takes parameters. The
import-linter contracts in pyproject.toml are the source of truth and enforce all of this.
"""

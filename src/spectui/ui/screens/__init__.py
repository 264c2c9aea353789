"""Screens, one module per view: `main` (a live run), `replay` and `follow` (a recorded or
followed run; each composes a `RunView`), `replay_pair` (two recordings side by side), `compare`
(the comparison table and one cell's responses), `tune`, `proxy` and `proxy_request` (the proxy's
traffic and one request), and the modal ones: `prompt_picker`, `spec_picker` and `dialogs`
(confirmation, help, no model)."""

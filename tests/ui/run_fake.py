"""Launch the TUI on the fake engine, to try it by hand (e.g. in tmux at 80×24).

python tests/ui/run_fake.py [--delay 0.02] [--theme spectui-light] [--run] [--fail-starts 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: `helpers` as pytest sees it

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.ui.apps.live import run_no_model, run_tui


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per token")
    parser.add_argument("--theme", default="spectui-dark")
    parser.add_argument("--run", action="store_true", help="run as soon as the server is ready")
    parser.add_argument("--fail-starts", type=int, default=0)
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--attached", action="store_true", help="pretend to attach (adopt)")
    parser.add_argument("--no-model", action="store_true", help="show the no-model screen")
    parser.add_argument("--n-predict", type=int, default=None)
    parser.add_argument("--status-file", type=Path, help="also write the exit line here")
    args = parser.parse_args()
    settings = Settings(theme=args.theme)
    if args.no_model:
        return run_no_model(settings, "the demo extra is not installed")
    engine = FakeEngine(
        delay=args.delay,
        fail_starts=args.fail_starts,
        crash_after=args.crash_after,
        mode="attached" if args.attached else "launched",
        needs_adopt=args.attached,
    )
    prompt = None
    if args.n_predict:
        settings = settings.model_copy(update={"n_predict": args.n_predict})
        prompt = "Write a very long answer."
    code = run_tui(engine, settings, prompt=prompt, autorun=args.run)
    line = f"exit {code}; engine closed {engine.close_calls} time(s)"
    if args.status_file:
        args.status_file.write_text(line + "\n")
    print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

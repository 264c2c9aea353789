"""The prompt picker: the built-in library, custom text or a file; raw or chat; sampling knobs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import ValidationError
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, Input, Label, OptionList, TextArea
from textual.widgets.option_list import Option

from spectui.core.prompts import BUILTIN_PROMPTS, BuiltinPrompt
from spectui.core.request import GenerationRequest
from spectui.ui.screens.dialogs import AnswerOnce

CUSTOM = "custom"
FILE = "file"
MAX_PROMPT_FILE_BYTES = 1_000_000
"""A prompt file larger than this is refused (it would not fit a small model's context anyway)."""


@dataclass(frozen=True, slots=True)
class PromptChoice:
    """What to run: a label for the screen and the request itself."""

    key: str
    """A built-in prompt's key, 'custom' or 'file'."""
    label: str
    """Shown in the answer pane's title."""
    request: GenerationRequest
    path: Path | None = None
    """The prompt file, for key 'file'."""


def builtin_choice(prompt: BuiltinPrompt, request: GenerationRequest) -> PromptChoice:
    """A built-in prompt run as ``request``."""
    return PromptChoice(prompt.key, prompt.key, request)


class PromptPickerScreen(AnswerOnce[PromptChoice | None]):
    """Dismisses with the new `PromptChoice`, or None when cancelled."""

    DEFAULT_CSS = """
    PromptPickerScreen {
        & #prompts {
            height: auto;
            max-height: 12;
        }
        & #sampling-row { height: auto; }
        & #sampling-row Input {
            width: 8;
            margin-right: 2;
        }
        & #custom-text { height: 5; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "choose", "Use"),
    ]

    def __init__(self, current: PromptChoice, n_predict: int | None = None) -> None:
        super().__init__()
        self.current = current
        self.n_predict = n_predict
        """The user's explicit n_predict (flag or settings): it wins over a prompt's own."""

    def compose(self) -> ComposeResult:
        request = self.current.request
        options = [Option(p.title, id=p.key) for p in BUILTIN_PROMPTS]
        options += [Option("Custom text…", id=CUSTOM), Option("Text from a file…", id=FILE)]
        with Vertical(id="dialog", classes="dialog"):
            yield Label("Choose a prompt", classes="dialog-title")
            yield OptionList(*options, compact=True, id="prompts")
            yield Label("", id="expectation", classes="dialog-help")
            custom = request.prompt if self.current.key == CUSTOM else ""
            yield TextArea(custom, id="custom-text", soft_wrap=True)
            path = str(self.current.path) if self.current.path else ""
            yield Input(path, placeholder="path/to/prompt.txt", compact=True, id="prompt-path")
            with Horizontal(id="sampling-row"):
                yield Checkbox("chat", request.chat, compact=True, id="chat")
                yield Label("n_predict", classes="field-label")
                yield Input(str(request.n_predict), type="integer", compact=True, id="n-predict")
                yield Label("temp", classes="field-label")
                yield Input(str(request.temperature), type="number", compact=True, id="temperature")
                yield Label("seed", classes="field-label")
                yield Input(str(request.seed), type="integer", compact=True, id="seed")
            yield Label(
                "enter: use · ctrl+s: use (from the text box) · esc: cancel",
                id="hint",
                classes="hint",
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [p.key for p in BUILTIN_PROMPTS] + [CUSTOM, FILE]
        options.highlighted = keys.index(self.current.key) if self.current.key in keys else 0
        options.focus()
        self._show_fields()

    @property
    def _key(self) -> str:
        options = self.query_one(OptionList)
        index = options.highlighted or 0
        return options.get_option_at_index(index).id or CUSTOM

    def _show_fields(self) -> None:
        key = self._key
        self.query_one("#custom-text").display = key == CUSTOM
        self.query_one("#prompt-path").display = key == FILE
        expectation = {p.key: p.expectation for p in BUILTIN_PROMPTS}.get(key, "")
        self.query_one("#expectation", Label).update(
            f"expect: {expectation}" if expectation else "raw completion unless chat is ticked"
        )

    @on(OptionList.OptionHighlighted)
    def _highlighted(self) -> None:
        key = self._key
        self._show_fields()
        for prompt in BUILTIN_PROMPTS:
            if prompt.key == key:
                n_predict = self.n_predict or prompt.n_predict
                self.query_one("#n-predict", Input).value = str(n_predict)

    @on(OptionList.OptionSelected)
    def _selected(self) -> None:
        key = self._key
        if key == CUSTOM:
            self.query_one("#custom-text").focus()
        elif key == FILE and not self.query_one("#prompt-path", Input).value.strip():
            self.query_one("#prompt-path").focus()
        else:
            self.action_choose()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_choose()

    def action_cancel(self) -> None:
        self.answer(None)

    def _hint(self, message: str) -> None:
        self.query_one("#hint", Label).update(message)

    def _prompt_text(self, key: str) -> tuple[str, str, Path | None]:
        """(text, label, path) for the highlighted option; ValueError explains a problem."""
        if key == CUSTOM:
            text = self.query_one(TextArea).text
            if not text.strip():
                raise ValueError("type a prompt in the text box first")
            return text, "custom prompt", None
        if key == FILE:
            raw = self.query_one("#prompt-path", Input).value.strip()
            if not raw:
                raise ValueError("enter the path of a prompt file")
            path = Path(raw).expanduser()
            try:
                if path.stat().st_size > MAX_PROMPT_FILE_BYTES:
                    raise ValueError(f"{path} is larger than {MAX_PROMPT_FILE_BYTES:,} bytes")
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(f"cannot read {path}: {error}") from error
            return text, path.name, path
        for prompt in BUILTIN_PROMPTS:
            if prompt.key == key:
                return prompt.text, prompt.key, None
        raise ValueError(f"unknown prompt {key}")

    def action_choose(self) -> None:
        key = self._key
        try:
            text, label, path = self._prompt_text(key)
            request = self.current.request.model_copy(
                update={
                    "prompt": text,
                    "chat": self.query_one(Checkbox).value,
                    "n_predict": int(self.query_one("#n-predict", Input).value),
                    "temperature": float(self.query_one("#temperature", Input).value),
                    "seed": int(self.query_one("#seed", Input).value),
                }
            )
            # model_copy skips validation: validate the result explicitly.
            request = GenerationRequest.model_validate(request.model_dump())
        except ValidationError as error:
            problem = error.errors()[0]
            self._hint(f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}")
            return
        except ValueError as error:
            self._hint(str(error))
            return
        self.answer(PromptChoice(key, label, request, path))

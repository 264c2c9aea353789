"""The spec-type picker: only the types this binary lists, plus draft options where they apply.

A type the model cannot run (no MTP layers, no hidden states for a drafter) is listed but marked,
with the reason on the help line. Space adds the highlighted type to a chain (the server tries a
chain's drafters in its own fixed order and takes the first draft); enter switches to the chain,
or to the highlighted type when the chain is empty.

Where the binary lists ``--spec-synth-len``, a last field forces the mean acceptance length: a
demonstration of how tokens/s follows acceptance, labelled SYNTHETIC wherever the config shows
(the server's output is not valid then).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import ValidationError
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from spectui.core.engine.base import ServerInfo
from spectui.core.errors import SpectuiError
from spectui.core.llama.gguf_meta import GgufFacts, gguf_facts
from spectui.core.llama.specconfig import SYNTH_LEN_FLAG, SpecConfig
from spectui.core.llama.spectypes import (
    MODEL_DRAFTERS,
    chain_reason,
    describe_type,
    explain_type,
    target_reason,
)
from spectui.ui.screens.dialogs import AnswerOnce


def model_facts(info: ServerInfo) -> GgufFacts | None:
    """The header facts of the model a launched server runs (None: attached, or unreadable).

    A header read, cached per file: the launch has usually read it already.
    """
    if info.mode != "launched" or not info.model:
        return None
    try:
        return gguf_facts(Path(info.model))
    except SpectuiError:
        return None


class SpecPickerScreen(AnswerOnce[SpecConfig | None]):
    """Choose a spec type; dismisses with the new `SpecConfig`, or None when cancelled."""

    DEFAULT_CSS = """
    SpecPickerScreen {
        & #spec-types {
            height: auto;
            max-height: 12;
        }
        & #draft-model-row, & #draft-n-row, & #synth-row { height: auto; }
        & #chain { color: $accent; }
        /* A reason is one line of text, often longer than the dialog is wide: wrap it. */
        & #type-help, & #hint { width: 100%; }
        & #draft-n-row Input, & #synth-row Input {
            width: 8;
            margin-right: 2;
        }
        & #synth-row .field-label { color: $warning; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "choose", "Switch"),
        Binding("space", "add_to_chain", "Add to chain"),
        Binding("backspace", "drop_from_chain", "Drop last", show=False),
    ]

    def __init__(
        self,
        spec_types: tuple[str, ...],
        current: SpecConfig | None,
        last_draft_model: Path | None,
        *,
        synthetic: bool = False,
        mtp_layers: int | None = None,
        target: GgufFacts | None = None,
    ) -> None:
        super().__init__()
        self.mtp_layers = mtp_layers
        """The model's MTP layer count, when known (the draft-mtp note says if it has none)."""
        self.target = target
        """What the model's GGUF header says, when known: types it cannot run are marked."""
        self.not_offered = {
            name: reason
            for name in spec_types
            if target is not None and (reason := target_reason(name, target))
        }
        """Each type this model cannot run, whatever the draft model, and why."""
        self.chain: list[str] = []
        """The chain built so far, in the order the types were added (empty: enter takes the
        highlighted type alone)."""
        self.spec_types = spec_types
        self.current = current
        self.last_draft_model = last_draft_model
        self.synthetic = synthetic
        """Offer the synthetic acceptance field (the binary lists ``--spec-synth-len``)."""

    def compose(self) -> ComposeResult:
        current = self.current
        with Vertical(id="dialog", classes="dialog"):
            yield Label("Switch speculative decoding type", classes="dialog-title")
            yield Label(
                f"now: {current.label if current else 'unknown'} · the server restarts, "
                "then the same prompt runs again",
                classes="dialog-help",
            )
            options = [
                Option(f"{name}  (not offered)" if name in self.not_offered else name, id=name)
                for name in self.spec_types
            ]
            yield OptionList(*options, compact=True, id="spec-types")
            # One line on what the highlighted type drafts from and needs (or why not offered).
            yield Label("", id="type-help", classes="dialog-help")
            yield Label(self._chain_text(), id="chain")
            with Vertical(id="draft-model-row"):
                yield Label("draft model (GGUF)", classes="field-label")
                draft = self.last_draft_model or (current.draft_model if current else None)
                yield Input(
                    str(draft or ""),
                    placeholder="/path/to/draft.gguf",
                    compact=True,
                    id="draft-model",
                )
            with Horizontal(id="draft-n-row"):
                yield Label("draft n-max", classes="field-label")
                yield Input(
                    self._n(current, "draft_n_max"), type="integer", compact=True, id="n-max"
                )
                yield Label("n-min", classes="field-label")
                yield Input(
                    self._n(current, "draft_n_min"), type="integer", compact=True, id="n-min"
                )
            with Horizontal(id="synth-row"):
                yield Label("SYNTHETIC acceptance length", classes="field-label")
                yield Input(placeholder="off", type="number", compact=True, id="synth-len")
                yield Label("demo only, output not valid", classes="field-label")
            yield Label(
                "enter: switch · space: add to chain · tab: options · esc: cancel",
                id="hint",
                classes="hint",
            )

    @staticmethod
    def _n(current: SpecConfig | None, field: str) -> str:
        value = getattr(current, field) if current else None
        return "" if value is None else str(value)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = list(self.spec_types)
        if self.current and self.current.types and self.current.types[0] in names:
            options.highlighted = names.index(self.current.types[0])
        elif names:
            options.highlighted = 0
        options.focus()
        self._show_fields()

    @property
    def _chosen_type(self) -> str | None:
        options = self.query_one(OptionList)
        if options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    def _chain_text(self) -> str:
        if not self.chain:
            return ""
        return f"chain: {' + '.join(self.chain)}  (backspace: drop the last)"

    def _types(self) -> tuple[str, ...]:
        """What enter would switch to: the chain, else the highlighted type."""
        if self.chain:
            return tuple(self.chain)
        chosen = self._chosen_type
        return (chosen,) if chosen else ()

    def _show_fields(self) -> None:
        chosen = self._chosen_type
        types = self._types()
        needs_draft = any(t in MODEL_DRAFTERS for t in types)
        self.query_one("#draft-model-row").display = needs_draft
        # The draft model is typed below, so only what the model itself lacks is a problem here.
        note = ""
        if chosen in self.not_offered:
            note = f"not offered: {self.not_offered[chosen]}"
        elif chosen == "draft-mtp" and self.mtp_layers is not None:
            note = explain_type(chosen, mtp_layers=self.mtp_layers)
        elif chosen:
            note = describe_type(chosen)
        self.query_one("#type-help", Label).update(note)
        chain = self.query_one("#chain", Label)
        chain.update(self._chain_text())
        chain.display = bool(self.chain)  # no line taken until a chain is being built
        speculating = bool(types) and types != ("none",)
        self.query_one("#draft-n-row").display = speculating
        self.query_one("#synth-row").display = self.synthetic and speculating

    def action_add_to_chain(self) -> None:
        """Add the highlighted type to the chain (refused with the reason when it cannot go)."""
        chosen = self._chosen_type
        if chosen is None:
            return
        problem = self.not_offered.get(chosen) or chain_reason((*self.chain, chosen))
        if problem is not None:
            self._hint(f"{chosen}: {problem}")
            return
        self.chain.append(chosen)
        self._hint(f"chain: {' + '.join(self.chain)} · enter: switch to it")
        self._show_fields()

    def action_drop_from_chain(self) -> None:
        """Take the last type off the chain."""
        if self.chain:
            self.chain.pop()
            self._show_fields()

    @on(OptionList.OptionHighlighted)
    def _highlighted(self) -> None:
        self._show_fields()

    @on(OptionList.OptionSelected)
    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_choose()

    def action_cancel(self) -> None:
        self.answer(None)

    def _hint(self, message: str) -> None:
        self.query_one("#hint", Label).update(message)

    def _int(self, selector: str) -> int | None:
        value = self.query_one(selector, Input).value.strip()
        return int(value) if value else None

    def action_choose(self) -> None:
        types = self._types()
        if not types:
            self._hint("choose a type first")
            return
        problem = next(
            (f"{t}: {self.not_offered[t]}" for t in types if t in self.not_offered), None
        ) or chain_reason(types)
        if problem is not None:
            self._hint(problem)
            return
        needs_draft = any(t in MODEL_DRAFTERS for t in types)
        draft_model: Path | None = None
        if needs_draft:
            kind = next(t for t in types if t in MODEL_DRAFTERS)
            text = self.query_one("#draft-model", Input).value.strip()
            if not text:
                self._hint(f"{kind} needs a draft model: enter its path")
                self.query_one("#draft-model", Input).focus()
                return
            draft_model = Path(text).expanduser()
            if not draft_model.is_file():
                self._hint(f"no such file: {draft_model}")
                self.query_one("#draft-model", Input).focus()
                return
        speculating = types != ("none",)
        n_max = n_min = None
        if speculating:
            try:
                n_max, n_min = self._int("#n-max"), self._int("#n-min")
            except ValueError:
                self._hint("n-max and n-min must be whole numbers")
                return
        if n_max is not None and n_min is not None and n_min > n_max:
            self._hint("n-min cannot exceed n-max")
            return
        extra: tuple[str, ...] = ()
        synth = self.query_one("#synth-len", Input).value.strip()
        if self.synthetic and speculating and synth:
            try:
                length = float(synth)
            except ValueError:
                length = 0.0
            if length < 1:
                self._hint("the synthetic acceptance length counts the target token: 1 or more")
                return
            extra = (SYNTH_LEN_FLAG, synth)
        try:
            spec = SpecConfig(
                types=types,
                draft_model=draft_model,
                draft_n_max=n_max,
                draft_n_min=n_min,
                extra_args=extra,
            )
        except ValidationError as error:
            self._hint(error.errors()[0]["msg"])
            return
        self.answer(spec)

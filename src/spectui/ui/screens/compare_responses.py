"""A comparison's drill-down: one prompt's responses in one round, each config against the
baseline; a changed answer stands side by side with the baseline's, both marked from the
divergent token, with the baseline's own odds there (near-tie or divergent). Opened from the
Compare screen (`spectui.ui.screens.compare`).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Label, Static

from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import CompareDocument
from spectui.core.compare.textdiff import Divergence


def response_content(record: RunRecord | None, baseline: bool) -> Content:
    """One response: the text, the part after the divergence from the baseline highlighted."""
    if record is None:
        return Content.styled("(not run yet)", "$text-muted")
    if not record.ok:
        return Content.styled(f"failed: {record.error}", "$error")
    text = record.text or "(empty response)"
    if baseline or record.divergence is None:
        return Content(text)
    cut = record.divergence.char
    return Content.assemble(text[:cut], (text[cut:], "reverse $error"))


def baseline_side(text: str, divergence: Divergence) -> Content:
    """The baseline's text next to a changed answer, marked from where they part."""
    cut = divergence.char
    return Content.assemble(text[:cut], (text[cut:] or "(ends here)", "reverse $warning"))


def evidence_line(divergence: Divergence) -> Content:
    """The divergent token, both sides, and the baseline's odds there."""
    where = (
        f"token {divergence.token}" if divergence.token is not None else f"char {divergence.char}"
    )
    parts: list[str | tuple[str, str]] = [(where, "bold"), ": baseline "]
    parts.append(
        repr(
            divergence.baseline_token
            if divergence.baseline_token is not None
            else divergence.baseline
        )
    )
    parts.append(" · this ")
    parts.append(
        repr(
            divergence.response_token
            if divergence.response_token is not None
            else divergence.response
        )
    )
    if divergence.kind is not None:
        style = "$warning" if divergence.kind == "near-tie" else "$error"
        odds = ", ".join(f"{t.token!r} {t.prob:.2f}" for t in divergence.baseline_top or [])
        parts += [" · ", (divergence.kind, f"bold {style}"), f" (baseline's odds: {odds})"]
    elif divergence.probe_error is not None:
        parts.append(f" · not probed: {divergence.probe_error}")
    else:
        parts.append(" · not probed")
    return Content.assemble(*parts)


def response_title(record: RunRecord | None, label: str, baseline: bool) -> Content:
    """The line above a response: whose it is and how it compares."""
    if baseline:
        verdict = Content.styled("baseline", "$text-muted")
    elif record is None or not record.ok or record.identical_to_baseline is None:
        verdict = Content.styled("not compared", "$text-muted")
    elif record.identical_to_baseline:
        verdict = Content.styled("identical to the baseline", "$success")
    else:
        where = record.divergence.short() if record.divergence else "differs"
        verdict = Content.styled(f"differs {where}", "$error")
    check = ""
    if record is not None and record.check_status is not None:
        check = f" · check {record.check_status}" + (
            f": {record.check_detail}" if record.check_detail else ""
        )
    return Content.assemble((label, "bold"), " — ", verdict, check)


class ResponsesScreen(Screen[None]):
    """One prompt's responses in one round, each config against the baseline."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Back"),
        Binding("left_square_bracket", "round(-1)", "Prev round", key_display="["),
        Binding("right_square_bracket", "round(1)", "Next round", key_display="]"),
    ]

    DEFAULT_CSS = """
    ResponsesScreen #responses-title { height: 1; padding: 0 1; background: $panel; }
    ResponsesScreen .response-title { margin-top: 1; padding: 0 1; }
    ResponsesScreen .response { padding: 0 1 0 3; }
    ResponsesScreen .side-by-side { height: auto; }
    ResponsesScreen .side-by-side > Static { width: 1fr; }
    ResponsesScreen .side-baseline { padding: 0 1 0 3; border-right: vkey $panel-lighten-2; }
    ResponsesScreen .divergence-evidence { padding: 0 1 0 3; color: $text-muted; }
    """

    def __init__(self, document: CompareDocument, prompt: str) -> None:
        super().__init__()
        self.document = document
        self.prompt = prompt
        self.round = max((r.round for r in self._counted()), default=1)

    def _counted(self) -> list[RunRecord]:
        return [
            r
            for r in self.document.runs
            # One per round: the lowest level's first client (the one the table pairs first).
            if r.prompt == self.prompt
            and not r.warmup
            and r.client == 0
            and r.level == min(self.document.plan.concurrency)
        ]

    def compose(self) -> ComposeResult:
        yield Label(id="responses-title")
        yield VerticalScroll(id="responses")
        yield Footer()

    def on_mount(self) -> None:
        self.redraw()

    def show(self, document: CompareDocument) -> None:
        """Take a newer document (runs keep arriving while this screen is open)."""
        self.document = document
        self.redraw()

    def redraw(self) -> None:
        """Rebuild the title and one block per config."""
        reps = self.document.plan.reps
        self.query_one("#responses-title", Label).update(
            f"{self.prompt} · round {self.round} of {reps}"
            "  ([ ] other rounds · highlighted: where the response leaves the baseline)"
        )
        box = self.query_one("#responses", VerticalScroll)
        box.remove_children()
        runs = {r.config: r for r in self._counted() if r.round == self.round}
        base = runs.get(self.document.plan.baseline.name)
        blocks: list[Widget] = []
        for config in self.document.plan.configs:
            record = runs.get(config.name)
            blocks.append(
                Static(
                    response_title(record, config.label, config.is_baseline),
                    classes="response-title",
                )
            )
            body = Static(response_content(record, config.is_baseline), classes="response")
            d = record.divergence if record is not None and not config.is_baseline else None
            if d is None or base is None:
                blocks.append(body)
                continue
            # A changed answer: the baseline's on the left, this one on the right, and why.
            side = Static(baseline_side(base.text, d), classes="side-baseline")
            blocks.append(Horizontal(side, body, classes="side-by-side"))
            blocks.append(Static(evidence_line(d), classes="divergence-evidence"))
        box.mount_all(blocks)

    def action_round(self, step: int) -> None:
        """Show the previous or next round."""
        self.round = min(max(self.round + step, 1), self.document.plan.reps)
        self.redraw()

    def action_close(self) -> None:
        self.dismiss(None)

"""The spec picker builds chains and says why a type is not offered (#28 items 3 and 4)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Label, OptionList

from helpers.engines import SPEC_TYPES, FakeEngine
from spectui.core.events import ServerState
from spectui.core.llama.gguf_meta import GgufFacts
from spectui.core.llama.specconfig import SpecConfig
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.spec_picker import SpecPickerScreen

from .ui_helpers import main_screen, settle

MakeApp = Callable[..., SpectuiApp]

GEMMA = GgufFacts(
    name="gemma.gguf",
    architecture="gemma3",
    mtp_layers=0,
    mtp_key="gemma3.nextn_predict_layers",
    nextn_tensors=False,
    markov_head=False,
    target_layers=None,
)
QWEN = GEMMA.model_copy(
    update={"name": "qwen.gguf", "architecture": "qwen35", "mtp_layers": 1, "nextn_tensors": True}
)
ALL_TYPES = (*SPEC_TYPES, "draft-eagle3", "draft-dflash")


def _text(picker: SpecPickerScreen, selector: str) -> str:
    return str(picker.query_one(selector, Label).render())


async def _picker(pilot: Pilot[None], app: SpectuiApp) -> SpecPickerScreen:
    await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
    await pilot.press("t")
    picker = app.screen
    assert isinstance(picker, SpecPickerScreen)
    return picker


async def test_space_builds_a_chain_and_enter_switches_to_it(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await _picker(pilot, app)  # ngram-simple highlighted
        await pilot.press("down", "space")  # ngram-mod
        await pilot.press("up", "space")  # ngram-simple
        assert picker.chain == ["ngram-mod", "ngram-simple"]
        assert "chain: ngram-mod + ngram-simple" in _text(picker, "#chain")
        await pilot.press("space")  # ngram-simple again: refused, with the reason
        assert picker.chain == ["ngram-mod", "ngram-simple"]
        assert "named twice" in _text(picker, "#hint")
        await pilot.press("up", "enter")  # draft-mtp highlighted: enter takes the chain
        await settle(pilot, lambda: bool(engine.switch_calls))
        assert engine.switch_calls[0] == (SpecConfig(types=("ngram-mod", "ngram-simple")), False)


async def test_backspace_drops_the_last_and_an_empty_chain_takes_the_highlighted(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await _picker(pilot, app)
        await pilot.press("space", "backspace")
        assert picker.chain == [] and _text(picker, "#chain") == ""
        await pilot.press("down", "enter")
        await settle(pilot, lambda: bool(engine.switch_calls))
        assert engine.switch_calls[0][0].types == ("ngram-mod",)


async def test_a_chain_with_a_model_drafter_asks_for_the_draft_model(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await _picker(pilot, app)
        await pilot.press("down", "space")  # ngram-mod
        picker.query_one(OptionList).highlighted = SPEC_TYPES.index("draft-simple")
        await pilot.press("space")
        assert picker.chain == ["ngram-mod", "draft-simple"]
        assert picker.query_one("#draft-model-row").display
        picker.query_one(OptionList).highlighted = SPEC_TYPES.index("draft-mtp")
        await pilot.press("space")  # draft-mtp beside draft-simple cannot share the draft context
        assert "cannot share the one draft context" in _text(picker, "#hint")
        picker.action_choose()
        await pilot.pause()
        assert engine.switch_calls == [] and "draft-simple needs a draft model" in _text(
            picker, "#hint"
        )


async def test_types_the_model_cannot_run_are_marked_with_why() -> None:
    picker = SpecPickerScreen(ALL_TYPES, SpecConfig(types=("ngram-mod",)), None, target=GEMMA)
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(picker)
        await pilot.pause()
        options = picker.query_one(OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(len(ALL_TYPES))]
        assert "draft-mtp  (not offered)" in prompts
        assert "draft-eagle3  (not offered)" in prompts
        assert "ngram-mod" in prompts and "draft-simple" in prompts
        options.highlighted = ALL_TYPES.index("draft-mtp")
        await pilot.pause()
        assert _text(picker, "#type-help").startswith("not offered: no MTP layers in this GGUF")
        await pilot.press("space")
        assert picker.chain == [] and "draft-mtp: no MTP layers" in _text(picker, "#hint")
        picker.action_choose()
        await pilot.pause()
        assert app.screen is picker  # refused: the picker stays, with the reason
        options.highlighted = ALL_TYPES.index("draft-eagle3")
        await pilot.pause()
        assert "exposes its hidden states" in _text(picker, "#type-help")


async def test_an_mtp_model_offers_draft_mtp_in_a_chain() -> None:
    picker = SpecPickerScreen(ALL_TYPES, SpecConfig(types=("ngram-mod",)), None, target=QWEN)
    app: App[None] = App()
    answers: list[SpecConfig | None] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(picker, answers.append)
        await pilot.pause()
        assert picker.not_offered == {}
        await pilot.press("space")  # ngram-mod (the current type) first, as the server tries it
        picker.query_one(OptionList).highlighted = ALL_TYPES.index("draft-mtp")
        await pilot.press("space", "enter")
        await pilot.pause()
    assert answers == [SpecConfig(types=("ngram-mod", "draft-mtp"))]

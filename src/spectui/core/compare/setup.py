"""Everything a comparison checks before a server starts: binary, model, configs, fairness.

A fair comparison keeps the binary, model, quantisation, ctx size, sampling, seed and n_predict
fixed and changes only the spec configuration. Configs are read with `SpecConfig.parse` (which
refuses any non-``--spec-*`` flag, saying which) and checked against this binary's ``--help``,
so a typo costs one line, not a half-run comparison.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.compare.models import BASELINE, CompareConfig
from spectui.core.compare.store import BinaryInfo, ModelInfo, ServerOptions
from spectui.core.engine.base import Engine, EngineDirs
from spectui.core.engine.live import LiveEngine, demo_model, launch_engine
from spectui.core.errors import SpecConfigError, SpectuiError
from spectui.core.llama.binary import (
    BinaryChoice,
    Capabilities,
    find_llama_server,
    probe_capabilities,
)
from spectui.core.llama.client import ServerClient
from spectui.core.llama.gguf import check_gguf
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.stream import DEFAULT_STALL_TIMEOUT_S

PEAK_INTERVAL_S = 0.5
"""How often a compared run samples the server's memory: its peak is a verdict's price, so it is
sampled twice as often as a watched run's (`core.stream.run.MEMORY_INTERVAL_S`)."""


class CompareSetupError(SpectuiError):
    """A comparison that cannot be run fairly, or at all, as asked."""

    title = "Cannot compare"
    exit_code = 2


@dataclass(frozen=True)
class CompareSetup:
    """The fixed part of every run: binary, its capabilities, model, launch options; and the
    stall watchdog of its engines (`LiveEngine`), which the plan does not fix: a resumed
    comparison may wait longer than the first invocation did."""

    binary: BinaryChoice
    caps: Capabilities
    model: Path
    server: ServerOptions
    host: str = "127.0.0.1"
    port: int | None = None
    dirs: EngineDirs = field(default_factory=EngineDirs)
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S
    parallel: int = 1
    """Server slots (``--parallel``): one per stream of the comparison's largest level.
    llama-server splits ``--ctx-size`` across its slots, so the launch multiplies it: every
    stream gets the context a one-stream comparison gets."""

    @property
    def binary_info(self) -> BinaryInfo:
        """The binary, for the results document."""
        return BinaryInfo(
            path=str(self.binary.path), version=self.caps.version, source=self.binary.source
        )

    @property
    def model_info(self) -> ModelInfo:
        """The model, for the results document."""
        try:
            size: int | None = self.model.stat().st_size
        except OSError:
            size = None
        return ModelInfo(path=str(self.model), size_bytes=size)

    def engine(self, spec: SpecConfig) -> LiveEngine:
        """A (not yet started) engine whose server launches with ``spec``."""
        return launch_engine(
            self.binary.path,
            self.caps,
            self.model,
            spec,
            ctx_size=self.server.ctx_size * self.parallel,
            host=self.host,
            port=self.port,
            extra_args=tuple(self.server.extra_args),
            dirs=self.dirs,
            stall_timeout_s=self.stall_timeout_s,
            parallel=self.parallel,
            memory_interval_s=PEAK_INTERVAL_S,
        )

    def with_slots(self, levels: Sequence[int]) -> CompareSetup:
        """This setup with a slot per stream of the largest of ``levels``; refused in one line
        when the extra server arguments fix fewer (``--parallel``)."""
        need = max(levels)
        given = declared_slots(self.server.extra_args, self.caps)
        if given is not None and given < need:
            raise CompareSetupError(
                f"--concurrency {need} needs {need} server slots, but the server arguments "
                f"give --parallel {given}: drop it (compare sets --parallel {need}) or lower "
                "the levels"
            )
        return dataclasses.replace(self, parallel=given or need)


def declared_slots(args: Sequence[str], caps: Capabilities) -> int | None:
    """The slot count ``args`` (extra llama-server arguments) set with ``--parallel``/``-np``
    (the last one wins, as in llama-server), or None."""
    slots: int | None = None
    for index, token in enumerate(args):
        flag, _, value = token.partition("=")
        if caps.canonical.get(flag, flag) not in ("--parallel", "-np"):
            continue
        value = value or (args[index + 1] if index + 1 < len(args) else "")
        try:
            slots = int(value)
        except ValueError:
            continue  # llama-server itself says what is wrong with it
    return slots


def slot_counter(engine: Engine) -> Callable[[], Awaitable[int | None]]:
    """Reads the slot count of ``engine``'s server from ``/slots`` (None: it does not say);
    the URL is read at each call, after any restart (compare's own server: no API key)."""

    async def count() -> int | None:
        async with ServerClient(engine.info.url) as client:
            try:
                slots = await client.slots()
            except SpectuiError:
                return None
        return len(slots) if slots else None

    return count


def prepare(
    *,
    server_bin: Path | None,
    model: Path | None,
    server: ServerOptions,
    host: str = "127.0.0.1",
    port: int | None = None,
    dirs: EngineDirs | None = None,
    resumed_binary: Path | None = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
) -> CompareSetup:
    """Find and check the binary and model (``resumed_binary``: a resumed file's, used unless
    ``server_bin`` names another)."""
    if resumed_binary is not None and server_bin is None:
        choice = find_llama_server(resumed_binary, "the results file")
    else:
        choice = find_llama_server(server_bin)
    dirs = dirs or EngineDirs()
    caps = probe_capabilities(choice.path, dirs.caps_cache)
    if model is None:
        model = demo_model()
    check_gguf(model)
    stray = SpecConfig.from_args(list(server.extra_args), caps)
    if stray is not None:
        raise CompareSetupError(
            "spec flags in the extra llama-server arguments would apply to every config: "
            "put them in a --config instead"
        )
    return CompareSetup(
        binary=choice,
        caps=caps,
        model=model.expanduser().absolute(),
        server=server,
        host=host,
        port=port,
        dirs=dirs,
        stall_timeout_s=stall_timeout_s,
    )


def parse_configs(
    texts: Sequence[str],
    caps: Capabilities,
    *,
    draft_model: Path | None = None,
    model: Path | None = None,
) -> tuple[CompareConfig, ...]:
    """The configs to compare, baseline (``none``) first and always present.

    Each is checked against the binary (and ``model``'s GGUF header: a type it cannot run is
    refused before any server starts); ``draft_model`` is used by draft types that name none.
    """
    configs: list[CompareConfig] = []
    for text in texts:
        try:
            spec = SpecConfig.parse(text, draft_model=draft_model)
            if not spec.needs_draft_model:
                spec = spec.model_copy(update={"draft_model": None})  # unused: keep it out
            args = tuple(spec.to_args(caps, model))  # validates against this binary
        except SpectuiError as error:
            raise SpecConfigError(f"config {text.strip()!r}: {error}") from None
        name = shlex.join(shlex.split(text))
        for other in configs:
            if other.args == args:
                raise CompareSetupError(
                    f"configs {other.name!r} and {name!r} launch the same server: give each once"
                )
        configs.append(CompareConfig(name=name, spec=spec, args=args))
    baseline = [c for c in configs if c.is_baseline]
    if not baseline:
        spec = SpecConfig(types=(BASELINE,))
        baseline = [CompareConfig(name=BASELINE, spec=spec, args=tuple(spec.to_args(caps)))]
    # The baseline runs first in every round: each config's answers are checked against it.
    return (baseline[0], *(c for c in configs if not c.is_baseline))

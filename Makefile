# hdsp: the first two targets are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps, so that nothing is installed twice: RUN_STAMP, the project alone
# (what hdspd and `hdsp` need: `make run`, `make demo`); STAMP, the project with
# its [dev] extra (the tests, lint, types, the benchmarks, JupyterLab).
RUN_STAMP := $(VENV)/.installed-run
STAMP     := $(VENV)/.installed

# The installer: uv (installed into the venv with pip the first time), with which a
# cold `make run` takes less than half as long as with pip (`make bench-install`
# measures both; uv reaches no network but the package index); INSTALLER=pip
# uses pip alone (pip's own settings: uv reads UV_* and uv.toml, not pip.conf),
# and so does a machine where pip cannot install uv. uv never downloads a Python
# of its own here: it installs into the venv's. uv writes no bytecode (compiling
# all that is installed would double a cold `make run`): the run stamp imports what
# hdspd and `hdsp` import at start once, writing theirs, so that their starts do
# not compile it again each time where PYTHONDONTWRITEBYTECODE is set (a fifth of
# hdspd's start-up CPU).
INSTALLER ?= uv
# What hdspd imports before READY and for its engine after (daemon/app.py,
# _load_engine), and `hdsp`; tests/test_makefile.py checks that each exists.
START_IMPORTS := hdsp.daemon.app hdsp.client.cli hdsp.daemon.agents hdsp.daemon.approvals \
	hdsp.daemon.checkpoints hdsp.daemon.commands hdsp.daemon.kernels \
	hdsp.daemon.kernels.providers hdsp.daemon.mcp hdsp.daemon.tasks hdsp.daemon.tools \
	hdsp.daemon.tools.notebook_hosts
define install
@if [ "$(INSTALLER)" = uv ] && { test -x $(BIN)/uv || { echo "pip install uv (into $(VENV))"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check uv || \
		{ echo "make: pip could not install uv; installing with pip alone" >&2; false; }; }; }; then \
		echo "uv pip install $(1)"; \
		UV_PYTHON_DOWNLOADS=never $(BIN)/uv pip install --quiet --python $(BIN)/python $(1); \
	else \
		echo "pip install $(1)"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check $(1); \
	fi
endef

# ---- JupyterLab panel, frontend half (clients/jupyterlab/frontend) -------------
# The prebuilt labextension: npm ci from the committed lockfile, then tsc and
# JupyterLab's builder (@jupyter/builder, all Node: no Python needed), into
# clients/jupyterlab/labextension. A wheel carries it as data files
# (pyproject's [tool.setuptools.data-files]); an editable install cannot, so the
# venv gets a link, as `jupyter labextension develop` makes.
FRONTEND     := clients/jupyterlab/frontend
LABEXT       := clients/jupyterlab/labextension
LABEXT_BUILT := $(LABEXT)/package.json
NPM_STAMP    := $(FRONTEND)/node_modules/.hdsp-lockfile-sha256
FRONTEND_SRC := $(wildcard $(FRONTEND)/src/*) $(wildcard $(FRONTEND)/style/*) \
                $(FRONTEND)/package.json $(FRONTEND)/tsconfig.json
# (The folder is the npm name, @hdsp/jupyterlab: JupyterLab serves it by that name.)
LABEXT_LINK  = mkdir -p $(VENV)/share/jupyter/labextensions/@hdsp && \
               ln -sfn $(CURDIR)/$(LABEXT) $(VENV)/share/jupyter/labextensions/@hdsp/jupyterlab
# ---- end of the frontend block ---------------------------------------------------

.PHONY: gateway-env run wheel bench-install test test-slow lint typecheck schema demo bench bench-quick clean labext wire-types lab browser-deps chromium postgresql screenshots

# Only what the daemon needs: the project without [dev], and no Node.js (the
# panel is built where it is used: `make lab`, `make test`, `make wheel`).
run: $(RUN_STAMP)
	$(BIN)/hdspd

# `make test` leaves out the tests marked slow (the browser tests stay in), to keep
# under 12 minutes on 2 cores; `make test-slow` runs those, and CI (.ci/run) both.
# The tests run side by side in TEST_WORKERS processes (pytest-xdist): most of a
# test's time is waiting for the processes it starts. Two, on 2 cores: with three,
# three JupyterLabs loading in three chromiums at once took a spec past its
# limits. The longest tests go first (tests/conftest.py), and a worker that runs
# out of tests takes half of what the other still has (--dist worksteal): with
# xdist's default split of the first quarter, one worker sat idle at the end
# while the other went through its share of long tests.
# TEST_WORKERS=0 runs them one by one in this process.
TEST_WORKERS ?= 2
test: $(STAMP) labext browser-deps postgresql gateway-env lint
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The slow tests (kill -9 rounds, gateway and Lab servers), side by side too:
# 19 min with two workers here, 34 one by one (SLOW_WORKERS=0).
SLOW_WORKERS ?= 2
test-slow: $(STAMP) labext browser-deps postgresql gateway-env
	$(BIN)/python -m pytest -m slow -n $(SLOW_WORKERS) --dist worksteal $(PYTEST_ARGS)

# gateway (issue 25): Jupyter Enterprise Gateway pins jupyter_server < 2 and
# jupyter_client < 7, so the remote-kernel tests run it from a venv of its own,
# made here once (tests/support/kernel_servers.py makes it too when missing).
gateway-env: $(STAMP)
	$(BIN)/python -c 'from tests.support.kernel_servers import enterprise_gateway_python as make; make()'

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install,-e .)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -c \
		'import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]' $(START_IMPORTS)
	touch $@

# (The panel's link may point at a panel not built yet: `make labext` builds it.)
$(STAMP): pyproject.toml $(RUN_STAMP)
	$(call install,-e '.[dev]')
	$(LABEXT_LINK)
	touch $@

lint: $(STAMP) typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy cannot follow setuptools' editable import hook, so it reads the packages
# through a tree of links that spells their import names.
typecheck: $(STAMP)
	rm -rf .typecheck && mkdir -p .typecheck/hdsp
	ln -s ../../protocol .typecheck/hdsp/protocol
	ln -s ../../daemon .typecheck/hdsp/daemon
	ln -s ../../clients .typecheck/hdsp/client
	cd .typecheck && ../$(BIN)/mypy -p hdsp.protocol -p hdsp.daemon -p hdsp.client

schema: $(STAMP)
	$(BIN)/python -m hdsp.protocol.schema > protocol/schema.json

# A whole session against the simulated demo model (no key): it proposes to write
# a note in a scratch workspace, and you approve (or deny) it in the terminal.
demo: $(RUN_STAMP)
	@ws=$$(mktemp -d /tmp/hdsp-demo-XXXXXX); echo "scratch workspace: $$ws"; \
	$(BIN)/hdsp run --profile demo --workspace "$$ws" \
		"Write a short note about this project to notes.md"; \
	echo; ls -l "$$ws"

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

# `make run` from fresh clones, cold and warm (bench/bench_install.py): a few
# minutes, downloading from the package index, so not part of `make bench`.
bench-install: $(STAMP)
	$(BIN)/python -m bench.bench_install $(BENCH_ARGS)

# The wheel users install with pip: the project and the prebuilt panel (no Node.js
# needed to install it), into dist/.
wheel: $(STAMP) labext
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) .typecheck build dist *.egg-info
	rm -rf $(FRONTEND)/node_modules $(FRONTEND)/lib $(FRONTEND)/tsconfig.tsbuildinfo $(LABEXT)

# ---- labserver (issue 16): the JupyterLab plugin's browser tests and `make lab` ----
# The browser tests (tests/jupyterlab/test_browser.py) run Galata from
# clients/jupyterlab/ui-tests/ on Debian's chromium: Playwright's own browser
# download cannot work here, so it is skipped and chromium comes from apt.
UI_TESTS  := clients/jupyterlab/ui-tests
UI_STAMP  := $(UI_TESTS)/node_modules/.installed
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
LAB_DIR   ?= examples/lab
LAB_LOG   ?= $(or $(XDG_STATE_HOME),$(HOME)/.local/state)/hdsp/hdspd-make-lab.log

browser-deps: $(UI_STAMP) chromium

$(UI_STAMP): $(UI_TESTS)/package.json $(UI_TESTS)/package-lock.json
	cd $(UI_TESTS) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
	touch $@

chromium:
	@command -v chromium >/dev/null 2>&1 || command -v "$$CHROMIUM" >/dev/null 2>&1 || { \
		echo "chromium is missing: installing it with apt (the browser tests need it)"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; } || { \
		echo "make: the browser tests need chromium and apt could not install it;" \
			"install it (apt-get install -y chromium) or set CHROMIUM=/path/to/chromium" >&2; \
		exit 1; }

# The tests of the store on PostgreSQL (issue 25) start a private server with
# Debian's initdb and pg_ctl (tests/support/postgres.py); never the system's own.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "PostgreSQL is missing: installing it with apt (the PostgreSQL store's tests need it)"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y postgresql; } || { \
		echo "make: the PostgreSQL store's tests need PostgreSQL and apt could not install it;" \
			"install it (apt-get install -y postgresql)" >&2; \
		exit 1; }

# The README's screenshots of the panel mid-task (browser scenarios 1-3), taken
# by the browser tests into clients/jupyterlab/screenshots (commit them), and of
# an agent-run cell with its plot in the open notebook (live edits through RTC).
screenshots: $(STAMP) labext browser-deps
	HDSP_SCREENSHOT_DIR=$(CURDIR)/clients/jupyterlab/screenshots $(BIN)/python -m pytest \
		tests/jupyterlab/test_browser.py -q -k "scenario_1 or scenario_2 or scenario_3"
	HDSP_SCREENSHOT_DIR=$(CURDIR)/clients/jupyterlab/screenshots $(BIN)/python -m pytest \
		tests/jupyterlab/test_browser_live_edits_rtc.py -q -k scenario_2

# JupyterLab with hdsp's plugin on a sample workspace; hdspd is started first
# when `hdsp daemon status` says it is not running (the plugin reconnects by itself).
lab: $(STAMP) labext
	@if $(BIN)/hdsp daemon status >/dev/null 2>&1; then echo "hdspd is running"; else \
		mkdir -p "$$(dirname "$(LAB_LOG)")"; echo "starting hdspd (log: $(LAB_LOG))"; \
		nohup $(BIN)/hdspd >>"$(LAB_LOG)" 2>&1 & fi
	$(BIN)/jupyter lab --ServerApp.root_dir="$(abspath $(LAB_DIR))" \
		--ServerApp.jpserver_extensions="hdsp.client.jupyterlab=True" $(LAB_ARGS)

# ---- JupyterLab panel, frontend half: targets -----------------------------------
labext: $(LABEXT_BUILT)

# The same stamp tests/jupyterlab_frontend/frontend.py writes: one npm ci per lockfile.
$(NPM_STAMP): $(FRONTEND)/package-lock.json
	cd $(FRONTEND) && npm ci --no-audit --no-fund --loglevel=error
	printf %s "$$(sha256sum $(FRONTEND)/package-lock.json | cut -d' ' -f1)" > $@

$(LABEXT_BUILT): $(NPM_STAMP) $(FRONTEND_SRC)
	cd $(FRONTEND) && npm run --silent build
	touch $@

# The panel's TypeScript wire types, from protocol/schema.json (after `make schema`).
wire-types: $(NPM_STAMP)
	cd $(FRONTEND) && npm run --silent generate:types

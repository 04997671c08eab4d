# hdsp: the first two targets are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

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

.PHONY: gateway-env run test test-slow lint typecheck schema demo bench bench-quick clean labext wire-types lab browser-deps chromium postgresql screenshots

run: $(STAMP) labext
	$(BIN)/hdspd

# `make test` leaves out the tests marked slow (the browser tests stay in), to keep
# under 20 minutes on 2 cores; `make test-slow` runs those, and CI (.ci/run) both.
test: $(STAMP) labext browser-deps postgresql gateway-env lint
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP) labext browser-deps postgresql gateway-env
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

# gateway (issue 25): Jupyter Enterprise Gateway pins jupyter_server < 2 and
# jupyter_client < 7, so the remote-kernel tests run it from a venv of its own,
# made here once (tests/support/kernel_servers.py makes it too when missing).
gateway-env: $(STAMP)
	$(BIN)/python -c 'from tests.support.kernel_servers import enterprise_gateway_python as make; make()'

$(STAMP): pyproject.toml | $(LABEXT_BUILT)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(LABEXT_LINK)
	touch $(STAMP)

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
demo: $(STAMP)
	@ws=$$(mktemp -d /tmp/hdsp-demo-XXXXXX); echo "scratch workspace: $$ws"; \
	$(BIN)/hdsp run --profile demo --workspace "$$ws" \
		"Write a short note about this project to notes.md"; \
	echo; ls -l "$$ws"

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

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

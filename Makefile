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

.PHONY: run test lint typecheck schema demo bench bench-quick clean labext wire-types

run: $(STAMP) labext
	$(BIN)/hdspd

test: $(STAMP) labext lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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

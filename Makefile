# hdsp: the first two targets are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck schema demo bench bench-quick clean

run: $(STAMP)
	$(BIN)/hdspd

test: $(STAMP) lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

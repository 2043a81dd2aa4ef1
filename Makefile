# Two commands on a fresh machine: `make run` and `make test`. Every target makes
# .venv when it is missing and installs what it needs, so nothing else comes first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev

.PHONY: run test bench lint venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the project's metadata changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/aep-bridge run

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check core channels tests bench
	$(BIN)/ruff format --check core channels tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info core/*.egg-info

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

# Reinstall when the project's metadata changes. The example third-party plugin is installed
# beside it, the way a user installs one, so its tests run with the rest.
PLUGINS := plugins/aep-bridge-ntfy
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS)) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,telegram]' $(addprefix -e ,$(PLUGINS))
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/aep-bridge run

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check core channels plugins tests bench
	$(BIN)/ruff format --check core channels plugins tests bench
	$(BIN)/mypy
	cd plugins/aep-bridge-ntfy && MYPYPATH=../../core ../../$(BIN)/mypy --strict src

clean:
	rm -rf $(VENV) build *.egg-info core/*.egg-info

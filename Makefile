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
# setuptools makes the editable install of our two package roots (core, channels) an import
# hook, which mypy cannot follow, and its `compat` mode would name the project folder, not
# the roots (`strict` links each file, so a new module would need a reinstall). A .pth that
# names the roots lets mypy find aep_bridge as installed, the way a plugin author's does.
PLUGINS := plugins/aep-bridge-ntfy
SOURCE_ROOTS := core channels
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS)) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,telegram]' $(addprefix -e ,$(PLUGINS))
	$(BIN)/python -c 'import os, sys, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "aep_bridge_sources.pth"), "w").writelines(os.path.abspath(r) + "\n" for r in sys.argv[1:])' $(SOURCE_ROOTS)
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/aep-bridge run

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

# The ntfy plugin is checked as its author checks it: plain --strict with no config file (so
# no pydantic mypy plugin) against aep_bridge as installed (no MYPYPATH).
lint: $(STAMP)
	$(BIN)/ruff check core channels plugins tests bench
	$(BIN)/ruff format --check core channels plugins tests bench
	$(BIN)/mypy
	cd plugins/aep-bridge-ntfy && env -u MYPYPATH ../../$(BIN)/mypy --config-file= --strict src

clean:
	rm -rf $(VENV) build *.egg-info core/*.egg-info

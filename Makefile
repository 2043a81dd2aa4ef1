# Two commands on a fresh machine: `make run` and `make test`. Every target makes
# .venv when it is missing and installs what it needs, so nothing else comes first:
# `make run` the package and every channel's extra, `make test`, `make lint` and `make bench`
# the test tools as well. Each says so the first time; after that nothing is installed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test bench lint venv clean snapshots FORCE

# Every built channel's extra (its platform SDK; web needs none), so each channel works after
# `make run`. The list is kept in .venv, and a .venv made with another list is updated.
CHANNEL_EXTRAS := telegram,discord,slack,matrix
EXTRAS_STAMP := $(VENV)/.channel-extras
$(EXTRAS_STAMP): FORCE
	@[ "$$(cat $@ 2>/dev/null)" = "$(CHANNEL_EXTRAS)" ] || { mkdir -p $(VENV) && echo "$(CHANNEL_EXTRAS)" > $@; }

# setuptools makes a plain .pth editable install only of a project with one package root.
# Ours has two (core, channels), so it installs an import hook, and says so in a warning box
# ("Please be careful with folders in your working directory ..."), whatever the package
# config. The box is only information, so it is filtered out; pip shows any other warning.
PIP := PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}ignore:Editable installation" \
	$(BIN)/python -m pip install --quiet
NEW_VENV := [ -x $(BIN)/python ] || { $(PYTHON) -m venv $(VENV) \
	&& $(BIN)/python -m pip install --quiet --upgrade pip; }

# Reinstall when the project's metadata changes. A .venv whose test tools are up to date has
# everything running needs.
$(RUN_STAMP): pyproject.toml $(EXTRAS_STAMP)
	@if [ $(DEV_STAMP) -nt pyproject.toml ] && [ $(DEV_STAMP) -nt $(EXTRAS_STAMP) ]; then :; \
	elif [ -e $@ ]; then echo "updating aep-bridge in $(VENV) (pyproject.toml or the channel extras changed)"; \
	else echo "installing aep-bridge into $(VENV) (first run, about 20 seconds)"; fi
	@$(NEW_VENV)
	@{ [ $(DEV_STAMP) -nt pyproject.toml ] && [ $(DEV_STAMP) -nt $(EXTRAS_STAMP) ]; } \
		|| $(PIP) -e '.[$(CHANNEL_EXTRAS)]'
	@touch $@

# The example third-party plugin is installed beside it, the way a user installs one, so its
# tests run with the rest.
# setuptools makes the editable install of our two package roots (core, channels) an import
# hook, which mypy cannot follow, and its `compat` mode would name the project folder, not
# the roots (`strict` links each file, so a new module would need a reinstall). A .pth that
# names the roots lets mypy find aep_bridge as installed, the way a plugin author's does.
PLUGINS := plugins/aep-bridge-ntfy
SOURCE_ROOTS := core channels
$(DEV_STAMP): pyproject.toml $(EXTRAS_STAMP) $(addsuffix /pyproject.toml,$(PLUGINS))
	@if [ -e $@ ]; then echo "updating the test tools in $(VENV) (a pyproject.toml or the channel extras changed)"; \
	elif [ -x $(BIN)/python ]; then echo "adding the test tools to $(VENV) (first run, about 20 seconds)"; \
	else echo "installing aep-bridge and the test tools into $(VENV) (first run, about 30 seconds)"; fi
	@$(NEW_VENV)
	@$(PIP) -e '.[dev,$(CHANNEL_EXTRAS)]' $(addprefix -e ,$(PLUGINS))
	@$(BIN)/python -c 'import os, sys, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "aep_bridge_sources.pth"), "w").writelines(os.path.abspath(r) + "\n" for r in sys.argv[1:])' $(SOURCE_ROOTS)
	@touch $@ $(RUN_STAMP)

venv: $(DEV_STAMP)

# `make run PORT=8801 CONFIG=path/to/config.json`: each is passed on only when set. The bridge
# stays the foreground process (Ctrl-C stops it); it logs the web page's sign-in URL itself.
# AEP_BRIDGE_MAKE_RUN (exported to the bridge alone): it then says a port's fix as
# `make run PORT=...`.
RUN_COMMAND = $(BIN)/aep-bridge run$(if $(CONFIG), --config "$(CONFIG)")$(if $(PORT), --port $(PORT))
run: export AEP_BRIDGE_MAKE_RUN = 1
run: $(RUN_STAMP)
	@echo "try it: $(BIN)/aep-bridge demo   (in another terminal, once the bridge below prints its sign-in URL)"
	$(RUN_COMMAND)

# Four workers (pytest-xdist), even on two cores: most tests wait on a process, a socket or a
# paced fake platform, not the CPU. A file's tests share a worker (`loadfile`), so a module's
# fixture (a pip install, a paced reference session) is built once. Plain `pytest` runs serially.
# It takes about 9 to 13 minutes on two cores, so it says where it is: a line per finished test
# file (tests/progress.py) rather than a dot per test, then the slowest files and tests.
TEST_OPTIONS := -n 4 --dist loadfile -p tests.progress -o console_output_style=classic --durations=15
test: $(DEV_STAMP)
	@echo "running the whole suite: about 9 to 13 minutes on two cores, a line per test file as it finishes"
	$(BIN)/python -m pytest $(TEST_OPTIONS)

bench: $(DEV_STAMP)
	$(BIN)/python bench/run.py

# The reference session as each channel's preview page (tests/snapshots): after a rendering
# change, once the pages tests/test_preview.py wrote beside them were reviewed by eye.
snapshots: $(DEV_STAMP)
	$(BIN)/python -m tests.test_preview

# The ntfy plugin is checked as its author checks it: plain --strict with no config file (so
# no pydantic mypy plugin) against aep_bridge as installed (no MYPYPATH).
lint: $(DEV_STAMP)
	$(BIN)/ruff check core channels plugins tests bench
	$(BIN)/ruff format --check core channels plugins tests bench
	$(BIN)/mypy
	cd plugins/aep-bridge-ntfy && env -u MYPYPATH ../../$(BIN)/mypy --config-file= --strict src

clean:
	rm -rf $(VENV) build *.egg-info core/*.egg-info

"""The command that adds one of aep-bridge's extras to this very install.

A channel whose platform SDK is missing is reported with the command that fixes it, and that
command depends on how aep-bridge was installed: a clone (an editable install of a checkout
with the Makefile) gets `make run` or its `.venv`'s pip, a pipx install `pipx runpip`, any
other install `pip install 'aep-bridge[EXTRA]'`. A newcomer copies the line as it stands.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path
from urllib.parse import unquote, urlparse

OWN_DISTRIBUTION = "aep-bridge"


@dataclass(frozen=True, slots=True)
class Install:
    """How aep-bridge is installed: `checkout` is the clone's folder for an editable one."""

    checkout: Path | None
    prefix: Path


def current() -> Install:
    """This process's install of aep-bridge."""
    return Install(_checkout(), Path(sys.prefix))


def _checkout() -> Path | None:
    """The folder of an editable install (PEP 610's direct_url.json), if it is one.

    Every copy of the metadata is read: run from the clone's folder, the egg-info a build
    left there comes first on the path, and only the installed copy says how it was installed.
    """
    for found in distributions(name=OWN_DISTRIBUTION):
        try:
            record = json.loads(found.read_text("direct_url.json") or "null")
        except (ValueError, OSError):
            continue
        if not isinstance(record, dict) or not (record.get("dir_info") or {}).get("editable"):
            continue
        url = urlparse(str(record.get("url", "")))
        if url.scheme == "file":
            return Path(unquote(url.path))
    return None


def command(extra: str, install: Install | None = None) -> str:
    """What to run to install `extra` here, as one sentence fragment with the commands quoted."""
    install = install or current()
    checkout = install.checkout
    if checkout is not None:
        own_venv = checkout / ".venv"
        if (checkout / "Makefile").is_file() and _same(install.prefix, own_venv):
            return (
                f"in the clone {checkout}, run `make run` (it installs every channel's extra) "
                f"or `.venv/bin/pip install -e '.[{extra}]'`"
            )
        return f"run `{install.prefix / 'bin' / 'pip'} install -e '{checkout}[{extra}]'`"
    if install.prefix.parent.name == "venvs" and install.prefix.parent.parent.name == "pipx":
        return f"run `pipx runpip {install.prefix.name} install 'aep-bridge[{extra}]'`"
    return f"run `pip install 'aep-bridge[{extra}]'`"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False

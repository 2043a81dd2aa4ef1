"""What the docs name exists: every `aep-bridge COMMAND --flag`, every file of this repository
and every `make TARGET` in README.md, docs/*.md and docs/channels/*.md.

The commands are checked against the parser `aep-bridge` itself builds (and a setup wizard's
options against the wizard's own parser), the paths against this checkout, the targets
against the Makefile. tests/test_docs_run.py runs the blocks marked runnable.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("channels/*.md")]
)

FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(.*?)^```", re.M | re.S)
SHELL = {"sh", "bash", "shell", "console"}
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
#: where a shell word ends a command: a pipe, a redirect, a comment, a list, a substitution
SHELL_END = re.compile(r"\s(?:\||&&|;|#|>|<|2>)|[;)`]")


@dataclass(frozen=True)
class Named:
    doc: str
    line: int
    text: str
    #: a line of a shell block: its commands may follow a separator, its comments are not code
    shell: bool = False
    #: a line of another block (a transcript, a log): a command only at its start
    block: bool = False

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def _code(path: Path) -> list[Named]:
    """The doc's code: each fenced block's lines, and each inline code span outside them."""
    text = path.read_text(encoding="utf-8")
    doc = str(path.relative_to(ROOT))
    found: list[Named] = []
    prose = text
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        shell = block["info"].split(" ")[0] in SHELL
        found += [
            Named(doc, first + n, line.split(" #", 1)[0] if shell else line, shell, not shell)
            for n, line in enumerate(block[2].splitlines())
            if not (shell and line.lstrip().startswith("#"))
        ]
        prose = prose.replace(block[0], "\n" * block[0].count("\n"), 1)
    for span in SPAN.finditer(prose):
        line = prose.count("\n", 0, span.start()) + 1
        found.append(Named(doc, line, " ".join(span[2].split())))
    return found


def _all_code() -> list[Named]:
    return [named for path in DOCS for named in _code(path)]


# -- aep-bridge COMMAND --flag ----------------------------------------------------------------

#: `aep-bridge` as a command: at the start, after a path or a shell separator, not as a word of
#: prose or a package name (`pipx install aep-bridge`, `-u aep-bridge`, `aep-bridge-ntfy`)
COMMAND = re.compile(r"(?:^|(?<=[\s/(`$]))aep-bridge (?=[a-z])(?P<rest>.*)$")
#: a transcript's or a log's line: a command only where the line starts with one
LINE_COMMAND = re.compile(r"^(?:\$ )?(?:\S*/)?aep-bridge (?=[a-z])(?P<rest>.*)$")
NOT_A_COMMAND = re.compile(
    r"(?:pipx|pip|inject|uninstall|install|-u|--now|restart|status|stop)\s+$"
)


def commands_named() -> list[tuple[Named, list[str]]]:
    """Each `aep-bridge ...` the docs show, as its words up to the end of the command."""
    found = []
    for named in _all_code():
        for match in (LINE_COMMAND if named.block else COMMAND).finditer(named.text):
            if NOT_A_COMMAND.search(named.text[: match.start()]):
                continue
            rest = SHELL_END.split(" " + match["rest"], 1)[0]
            try:
                words = shlex.split(rest)
            except ValueError:  # an unbalanced quote: the span ends inside the command
                words = rest.split()
            if not any(word.endswith(":") for word in words[:3]):  # a message, not a command
                found.append((named, words))
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _wizard_parsers() -> dict[str, argparse.ArgumentParser]:
    from aep_bridge.commands.setup_command import _parser, find_wizards
    from aep_bridge.contract.plugins import PluginHost

    host = PluginHost()
    host.load()
    wizards, _ = find_wizards(host)
    return {name: _parser(wizard) for name, wizard in wizards.items()}


def check_command(
    words: list[str],
    parser: argparse.ArgumentParser,
    wizards: dict[str, argparse.ArgumentParser],
) -> str | None:
    """What is wrong with `aep-bridge WORDS` (None: each subcommand and flag exists)."""
    path = ["aep-bridge"]
    subcommands = _subcommands(parser)
    for n, word in enumerate(words):
        if word.isupper() or word in ("...", "|"):  # a placeholder: NAME, FILE, ...
            return None
        if subcommands:
            word = word.strip("[]") if word.startswith("[-") else word  # `token [--rotate]`
            if word.startswith("-"):
                if word.split("=", 1)[0] not in _options(parser):
                    return f"`{' '.join(path)}` has no option {word}"
                continue
            if word not in subcommands:
                return f"`{' '.join(path)}` has no command {word!r} (it has {sorted(subcommands)})"
            parser = subcommands[word]
            path.append(word)
            if word == "hook":  # the agent's payload follows, not options
                return None
            if word == "setup":
                rest = words[n + 1 :]
                name = next((w for w in rest if not w.startswith("-")), None)
                if name is not None and not name.isupper():
                    if name not in wizards:
                        return f"`aep-bridge setup` has no wizard {name!r} ({sorted(wizards)})"
                    flags = {w.split("=", 1)[0] for w in rest if w.startswith("--")}
                    unknown = flags - _options(wizards[name])
                    if unknown:
                        return f"`aep-bridge setup {name}` has no option {sorted(unknown)}"
                return None
            subcommands = _subcommands(parser)
            continue
        if word.startswith("-") and word != "-":
            for flag in word.split("=", 1)[0].split("/"):  # `--host/--port`: both
                if flag not in _options(parser):
                    return f"`{' '.join(path)}` has no option {flag}"
    return None


def test_every_command_and_flag_the_docs_name_exists():
    from aep_bridge.cli.parser import build_parser

    parser = build_parser()
    wizards = _wizard_parsers()
    named = commands_named()
    assert len(named) > 100  # the scan finds the docs' commands
    wrong = [
        f"{where}\n    {problem}"
        for where, words in named
        if (problem := check_command(words, parser, wizards))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_command_check_finds_a_wrong_command_and_flag():
    from aep_bridge.cli.parser import build_parser

    parser, wizards = build_parser(), _wizard_parsers()
    assert check_command(["validate", "--json", "-"], parser, wizards) is None
    assert check_command(["config", "path"], parser, wizards) is None
    assert check_command(["setup", "telegram", "--yes"], parser, wizards) is None
    assert "no command 'serve'" in check_command(["serve"], parser, wizards)
    assert "no option --jsn" in check_command(["status", "--jsn"], parser, wizards)
    assert "no command 'where'" in check_command(["config", "where"], parser, wizards)
    assert "no option ['--chat']" in check_command(["setup", "telegram", "--chat"], parser, wizards)


# -- files of this repository ------------------------------------------------------------------

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
#: a code span that is a path of this repository (not a command, not a file of the user's)
REPO_PATH = re.compile(r"(?:docs|bench|tests|core|channels|plugins|\.ci)/[\w./-]*")
#: paths of another project that the docs show as a channel shows them
NOT_OURS = {"tests/test_totals.py": "the demo session's project (docs/rendering.md)"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def paths_named() -> list[tuple[Named, Path, str]]:
    """Each file of the repository a doc links to or names in code: the doc's line, the file,
    and the anchor when the link has one."""
    found = []
    for path in DOCS:
        doc = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            for link in LINK.finditer(line):
                target = link["target"]
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, anchor = target.partition("#")
                where = (path.parent / file) if file else path
                found.append((Named(doc, n, target), where, anchor))
        for named in _code(path):
            plain = not (named.shell or named.block)
            if plain and REPO_PATH.fullmatch(named.text) and named.text not in NOT_OURS:
                # named from the repository's root, or beside the doc as its links are
                word = named.text
                where = ROOT / word if (ROOT / word).exists() else path.parent / word
                found.append((named, where, ""))
    return found


def test_every_file_and_heading_the_docs_name_exists():
    named = paths_named()
    assert len(named) > 100
    wrong = []
    for where, file, anchor in named:
        if not file.exists():
            wrong.append(f"{where}\n    no such file: {file.resolve().relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            wrong.append(f"{where}\n    no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not wrong, "\n".join(wrong)


# -- make TARGET -------------------------------------------------------------------------------


def _targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([\w-]+):(?!=)", makefile, re.M))


def test_every_make_target_the_docs_name_exists():
    targets = _targets()
    assert {"run", "test"} <= targets
    named = [
        (where, target)
        for where in _all_code()
        for target in re.findall(r"^(?:\$ )?make (?:--?[\w-]+ )*([a-z][\w-]*)", where.text)
        if not where.block
    ]
    assert len(named) > 5
    wrong = [
        f"{where}\n    no make target {target!r}"
        for where, target in named
        if target not in targets
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("line", ["make demo", "run `make bench-all` first"])
def test_the_target_check_finds_a_missing_target(line):
    assert set(re.findall(r"make ([a-z][\w-]*)", line)) - _targets()


# -- what the docs say, against what runs ------------------------------------------------------


def test_the_readme_lists_every_doc():
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Documentation\n")[1]
    section = section.split("\n## ", 1)[0]
    listed = {link for link in LINK.findall(section)}
    docs = {str(p.relative_to(ROOT)) for p in DOCS if p.name != "README.md"}
    assert docs - listed == set(), "README.md's Documentation lists no link to these"


def test_the_web_pages_empty_state_names_what_make_run_says_to_try():
    page = (ROOT / "channels" / "aep_bridge_web" / "static" / "index.html").read_text()
    [empty] = re.findall(r'<p id="sessions-empty"[^>]*>(.*?)</p>', page, re.S)
    [command] = re.findall(r"<code>(.*?)</code>", empty)
    # after `make run` the command is in .venv/bin, not on PATH: the page names it so, as the
    # line `make run` prints does
    [tried] = re.findall(r"try it: (\S+ \w+)", (ROOT / "Makefile").read_text())
    assert command == tried.replace("$(BIN)", ".venv/bin"), empty
    program = ROOT / command.split()[0]
    assert program.is_file(), command
    assert os.access(program, os.X_OK), command


def _row(doc: str, key: str, channel: str) -> str:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    if doc == "configuration.md":  # one section per channel
        text = text.split(f"### `{channel}`", 1)[1].split("\n### ", 1)[0]
    [row] = [line for line in text.splitlines() if re.match(rf"\|[^|]*`{key}`", line)]
    return row


@pytest.mark.parametrize(
    ("doc", "key", "model"),
    [
        ("channels/discord.md", "api_base_url", "aep_bridge_discord.config:DiscordConfig"),
        ("channels/discord.md", "gateway_url", "aep_bridge_discord.config:DiscordConfig"),
        ("channels/slack.md", "api_base_url", "aep_bridge_slack.config:SlackConfig"),
        ("configuration.md", "api_base_url", "aep_bridge_slack.config:SlackConfig"),
    ],
)
def test_a_url_row_shows_the_url_s_form(doc: str, key: str, model: str):
    """A proxy's or a fake's URL is written like the default: its path (`/api/v10`, Slack's
    `/api/`) and its scheme (`wss://` for the gateway)."""
    import importlib

    module, name = model.split(":")
    default = getattr(importlib.import_module(module), name).model_fields[key].default
    from urllib.parse import urlsplit

    row = _row(doc, key, module.split(".")[0].removeprefix("aep_bridge_"))
    assert f"`{default}`" in row, f"{doc}: the {key} row does not show {default}"
    scheme, path = urlsplit(default).scheme, urlsplit(default).path
    assert f"`{scheme}://`" in row, f"{doc}: the {key} row does not say it takes {scheme}://"
    if path.strip("/"):
        assert f"`{path}`" in row, f"{doc}: the {key} row does not say the path is {path}"


def test_agents_md_says_what_an_uninstall_gives_back(tmp_path: Path):
    """A settings file with a packed value comes back from an install and an uninstall with the
    same settings, spread over lines: agents.md must not promise its bytes."""
    import io
    import json

    from aep_bridge.agents.install import main

    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    before = b'{\n  "permissions": {"allow": ["Bash(npm test)", "Read"]}\n}\n'
    settings.write_bytes(before)
    (tmp_path / ".git").mkdir()
    quiet = io.StringIO()
    assert main("claude-code", project=tmp_path, out=quiet, err=quiet) == 0
    assert main("claude-code", project=tmp_path, uninstall=True, out=quiet, err=quiet) == 0
    after = settings.read_bytes()
    assert json.loads(after) == json.loads(before)
    assert after != before
    agents = " ".join((ROOT / "docs" / "agents.md").read_text(encoding="utf-8").split())
    [promise] = re.findall(r"So an install followed by an uninstall (.*?\.)", agents)
    assert "bytes" not in promise, promise

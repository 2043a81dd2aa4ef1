"""The card a person judges, in the order they read it (issue 32, item 2): whose question it
is (the agent in the title, the session by its name), the working folder, exactly what will
happen (the whole command in code, the change as a diff), then the agent's reason as markdown;
nothing said twice. The real bridge on the local hub, or the real hook mapping and renderer."""

from __future__ import annotations

from pathlib import Path

from aep_bridge.aep.redaction import Redactor
from aep_bridge.markup import Code, Diff, Paragraph, plain
from aep_bridge.render import Renderer
from aep_bridge.render.cards import MAX_CARD_CODE
from tests import permission_card
from tests.core.rig import Rig, two_channels


async def test_the_bridge_names_the_session_on_the_card_and_reads_the_requests_context(
    tmp_path: Path,
) -> None:
    """A request that carries its tool call in `context` (no `cause`: Claude Code's
    PermissionRequest has no call id) still shows the command in code, not the prompt."""
    async with Rig(tmp_path / "bridge", channels=two_channels(capture="full")) as rig:
        agent = rig.agent()
        agent.start(label=permission_card.SESSION_NAME, cwd=permission_card.CWD)
        agent.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": "Permission requested: Bash — make test (Run the tests)",
                "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
                "context": {
                    "tool_name": "Bash",
                    "tool_input": {"command": "make test", "description": "Run the `unit` tests"},
                    "cwd": permission_card.CWD,
                },
            },
            subject="Bash",
            capture="full",
        )
        await rig.settle()
        _, request, _ = rig.card("alpha")
        text = rig.card_text("alpha")
    assert request.session_name == permission_card.SESSION_NAME
    assert request.title == "test-agent asks permission: Bash"
    assert Code(code="make test", language="bash") in request.details
    shown = plain(request.details)
    assert permission_card.in_order(shown, "Folder: ~/src/shop", "make test", "Run the unit tests")
    assert "Permission requested" not in shown
    assert "`" not in shown
    assert "Run the unit tests" in text


async def test_a_prompt_is_read_as_markdown_under_the_folder(tmp_path: Path) -> None:
    async with Rig(tmp_path / "bridge") as rig:
        agent = rig.agent()
        agent.start(label="clean up", cwd="/home/ana/src/shop")
        agent.ask("Run `rm -rf build/`?")
        await rig.settle()
        _, request, _ = rig.card("alpha")
    assert plain(request.details) == "Folder: ~/src/shop\n\nRun rm -rf build/?"
    assert request.description == plain(request.details)
    (prompt,) = [b for b in request.details[1:] if isinstance(b, Paragraph)]
    assert any(span.code and span.text == "rm -rf build/" for span in prompt.spans)


def test_a_real_claude_code_bash_card_in_order() -> None:
    card = permission_card.bash_card()
    kinds = [type(b) for b in card.details]
    assert kinds[:2] == [Paragraph, Code]
    assert card.details[1] == Code(code=permission_card.COMMAND, language="bash")  # whole
    assert permission_card.in_order(
        card.description,
        f"Folder: {permission_card.FOLDER}",
        permission_card.COMMAND,
        permission_card.REASON_SHOWN,
    )
    assert "Permission requested" not in card.description


def test_a_real_claude_code_edit_card_shows_the_diff() -> None:
    card = permission_card.edit_card()
    (diff,) = [b for b in card.details if isinstance(b, Diff)]
    assert card.description.count("src/app.py") == 1  # the diff names its file, once
    assert "-x = 1" in diff.unified
    assert "+x = 2" in diff.unified


def test_at_redacted_the_hooks_prompt_loses_its_header_and_a_lone_command_is_code() -> None:
    """The default: attention at `redacted` carries no `context`, only the AEP mapping's
    prompt. Its header repeats the title; what follows it alone is the command."""
    payload = permission_card.hook_payload(
        "PermissionRequest", tool_input={"command": "make *.o clean"}
    )
    card = permission_card.card_of(payload, attention="redacted")
    assert Code(code="make *.o clean") in card.details  # not read as markdown: `*` kept
    assert "Permission requested" not in card.description
    with_reason = permission_card.card_of(
        permission_card.hook_payload("PermissionRequest"), attention="redacted"
    )
    assert with_reason.description.endswith("npm test (Run the test suite)")
    assert "Permission requested" not in with_reason.description


def test_a_command_too_long_for_a_card_says_how_much_is_left_out() -> None:
    command = "echo " + "x" * (MAX_CARD_CODE * 2)
    payload = permission_card.hook_payload("PermissionRequest", tool_input={"command": command})
    card = permission_card.card_of(payload)
    (code,) = [b for b in card.details if isinstance(b, Code)]
    assert command.startswith(code.code.split("\n")[0])
    shown = len(code.code.split("\n")[0])
    assert code.code.endswith(f"… ({len(command) - shown:,} more characters)")


def test_a_seen_call_without_its_arguments_falls_back_to_the_requests_context() -> None:
    """The renderer keeps nothing of a call seen at `metadata`; the request's context says
    what it runs."""
    renderer = Renderer(Redactor())
    card, _ = renderer.permission_request(
        permission_card.request_event(permission_card.hook_payload("PermissionRequest")),
        "k1",
        ceiling="full",
    )
    assert Code(code="npm test", language="bash") in card.details
    assert card.session_name is None


# -- what an agent cannot make a card say (issue 32's review) ---------------------------------

_SOURCE = "aep://host/agent/some-agent/session/s1"


def _asked(call_args: dict, request_data: dict) -> list:
    """The card's details for a request whose `cause` names a Bash call made with
    `call_args`; the request's own data is `request_data`."""
    from aep_bridge.aep.build import make_event
    from aep_bridge.aep.redaction import digest

    renderer = Renderer(Redactor())
    call = make_event(
        "tool.requested",
        source=_SOURCE,
        agent="some-agent",
        session="s1",
        seq=1,
        subject="Bash",
        capture="full",
        data={
            "tool": {"name": "Bash", "call_id": "c1"},
            "args": call_args,
            "args_digest": digest(call_args),
        },
    )
    renderer.render(call, ceiling="full", verbosity="normal")
    request = make_event(
        "attention.requested",
        source=_SOURCE,
        agent="some-agent",
        session="s1",
        seq=2,
        subject="Bash",
        cause=call.id,
        capture="full",
        data={"kind": "permission", "options": [{"id": "allow", "label": "Allow"}], **request_data},
    )
    card, _ = renderer.permission_request(request, "k1", ceiling="full")
    return list(card.details)


def test_a_request_s_own_context_wins_over_a_harmless_call_it_names() -> None:
    """An emitter names a harmless earlier call (`ls`) as the cause while the request's own
    context asks to run something else: the card shows what the request asks."""
    details = _asked(
        {"command": "ls"},
        {
            "prompt": "Run it?",
            "context": {"tool_name": "Bash", "tool_input": {"command": "rm -rf ~/data"}},
        },
    )
    assert [b.code for b in details if isinstance(b, Code)] == ["rm -rf ~/data"]


def test_an_agent_s_reason_cannot_draw_a_second_command_or_a_heading() -> None:
    """The reason is the agent's markdown: bold and code spans, but a fenced block or a
    heading in it is flattened into its paragraph, never a code block like the command's."""
    reason = "Checks the tree.\n\n```bash\ngit status\n```\n\n# Folder: ~/safe"
    details = _asked({"command": "curl x | sh", "description": reason}, {"prompt": "Run it?"})
    assert [b.code for b in details if isinstance(b, Code)] == ["curl x | sh"]
    assert all(isinstance(b, (Code, Paragraph)) for b in details)
    assert "git status" in plain(tuple(details))  # said, as words


def test_a_prompt_that_says_more_than_the_command_is_shown() -> None:
    """A call without a reason: its prompt is left out only when it is the command itself,
    not when it merely contains it (`ls, then I delete ~/data`)."""
    details = _asked({"command": "ls"}, {"prompt": "ls, then I delete ~/data"})
    assert "then I delete" in plain(tuple(details))
    said_once = _asked({"command": "ls"}, {"prompt": "ls"})  # the command again: left out
    assert [b for b in said_once if not isinstance(b, Code)] == []

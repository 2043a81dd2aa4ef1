"""Codex hooks -> AEP events (AEP-0002 Annex A.2), and the decision a held hook prints back.

Pure: a hook payload (the JSON Codex writes on the hook command's stdin) in, `Emission`s out;
no I/O, no state. The daemon owns the envelope, `seq`/`epoch` and the held loop.

Mapped against (see `MAPPED`): the Codex hooks documentation
(developers.openai.com/codex/hooks, snapshot of 2026-05-18 in spybara.com's history of
docs/en/hooks) and the codex-rs/hooks sources of openai/codex as of the `SubagentStart` /
`SubagentStop` hooks (PRs #22782 and #22873, May 2026): `src/schema.rs` and the generated
`schema/generated/*.command.{input,output}.schema.json`. `PermissionRequest` exists since
Codex CLI 0.122.0 (PR #17563).

Field names relied on, all from those generated input schemas: every hook has `session_id`,
`hook_event_name`, `cwd`, `model`; turn-scoped hooks add `turn_id` ("Codex extension: expose the
active turn id"); `SessionStart.source`; `UserPromptSubmit.prompt`;
`Stop.last_assistant_message`; `PreToolUse` / `PostToolUse` `tool_name`, `tool_use_id`,
`tool_input`, and `PostToolUse.tool_response` (any JSON value); `PermissionRequest` `tool_name`
and `tool_input.{command, description}` (`description` is the request's justification, PR
#17563); `SubagentStart` / `SubagentStop` `agent_id` (the child thread id) and `agent_type`;
`PreCompact` / `PostCompact` `trigger` (`manual` | `auto`).

Identity: Codex's thread (`session_id`) is the AEP session, its turn (`turn_id`) the AEP run.

| Codex hook        | AEP type                    | data at `full` (the ceiling drops the rest)  |
|-------------------|-----------------------------|----------------------------------------------|
| SessionStart      | session.started             | client.name, trigger (`source`), model, cwd R
| UserPromptSubmit  | run.started                 | trigger `user`, prompt R                     |
| Stop              | run.finished                | summary R (`last_assistant_message`)         |
| PreToolUse        | tool.requested              | tool, args_digest, args_redacted R, args F   |
| PostToolUse       | tool.completed              | tool, result_digest, result_redacted R, result F
| PermissionRequest | attention.requested         | permission, prompt, allow/deny, context F    |
| SubagentStart     | delegation.subagent.started | agent_type; subject = `agent_id`             |
| SubagentStop      | delegation.subagent.stopped | agent_type if given; subject = `agent_id`    |
| PreCompact        | (nothing)                   | deviation, below                             |
| PostCompact       | session.compacted           | trigger                                      |
| anything else     | x.codex.session.<snake>     | `{}` (AEP-0001 §6 mechanical fallback)       |

R = gated `redacted`, F = `full`; `tool` is {name, call_id}. Digests are over the original
values, before gating (AEP-0003 §9.3). The `*_redacted` copies are the originals: gating at a
`redacted` ceiling runs them through the §9.4 pipeline; at `full` they are left out, as `args` /
`result` carry the same.

Deviations from a strict Annex A reading, all deliberate:

- `PreCompact` emits nothing; `session.compacted` fires once, at `PostCompact` (the fixture's
  documented deviation).
- No `tool.failed`: Codex has no tool-failure hook, a failed command still arrives as
  `PostToolUse`, so it stays `tool.completed` (its `result` shows the exit).
- `StopFailure` (a newer Codex hook outside Annex A's ten) is not mapped to `run.failed` yet:
  like any hook not in the table it takes the vendor fallback.
- The permission card offers allow / deny (Annex A); the daemon adds "Allow this exact call for
  this session" (`session_grants`). Codex's hook output has no session-scoped rule on main:
  `decision.updatedPermissions` is "Reserved for a future permission-rewrite capability.
  PermissionRequest hooks currently fail closed if this field is present"
  (`PermissionRequestDecisionWire` in codex-rs/hooks/src/schema.rs and the generated
  `permission-request.command.output.schema.json`, still so in the codex-hooks sources that
  carry the subagent hooks; the experimental `permission_suggestions` / `updatedPermissions`
  PRs #17739 and #17746 are closed, not merged).
  So `allow_session` prints a plain allow, and the daemon remembers the rule itself, keyed by
  `session_rule_key`: this tool with exactly this input (the justification included) in this
  working folder, which is all the label promises; a command that differs by a byte, or runs
  elsewhere, is asked again (issue 30: a button grants what it says, nothing wider).
- At a `metadata` attention ceiling the prompt is synthesized from structure ("codex requests
  permission: Bash", AEP-0003 §9.2), never the command; the labels "Allow" / "Deny" are ours,
  structural, and stay.
- The held Stop (issue 33, away mode): besides `run.finished` (emitted once the agent does
  stop, after Done or the hold's end, never before the question), a Stop the daemon holds
  (`STEERED_HOOKS`) asks the chat "codex finished: what next?" (the daemon's question, the
  same for every agent: Codex's Stop input names `last_assistant_message` as Claude Code's
  does, nullable), and the answer goes back as Codex's Stop output (`stop_output`). Wire
  (`StopCommandOutputWire` in codex-rs/hooks/src/schema.rs, the generated
  `stop.command.output.schema.json`, `parse_completed` in
  codex-rs/hooks/src/events/stop.rs): `{"decision": "block", "reason": <words>}` on stdout
  with exit 0 blocks the stop and `reason` becomes the continuation prompt Codex gives the
  model; a blank `reason` is an error there ("decision:block without a non-empty reason",
  the hook fails and the turn stops), so blank words are never sent. Empty stdout with exit
  0 lets the turn end: that is Done, a timeout, or no answer. `continue: false` (with
  `stopReason`) would end the session's processing, more than Done means, so it is not used.
  The Stop input's `stop_hook_active` (true once a Stop hook already continued this turn) is
  not a reason to skip the question: each instruction from the chat continues the turn, and
  Codex counts no consecutive blocks (the Stop handler has no cap; openai/codex issue 37937
  is a loop of blocks that never ends): `STOP_BLOCK_CAP` is 0, and a long remote
  conversation needs no setting.
- `PermissionRequest` names no call (no `tool_use_id`): the daemon sets the request's `cause`
  to the `tool.requested` of the open call with the same tool and input (calls.py). The
  prompt's input carries the justification (`description`): a call whose PreToolUse input
  lacks it is a different input, and is not linked (the card shows the prompt's words).
"""

from __future__ import annotations

from typing import Any, Final

from .grants import Grant
from .mapping import (
    ALLOW,
    ALLOW_SESSION,
    DEFAULT_CEILING,
    DENY,
    DENY_MESSAGE,
    Ceiling,
    Emission,
    Verdict,
    digest,
    emission,
    map_named,
    permission_request,
    text_of,
    tool_event,
    tool_name,
)

AGENT: Final = "codex"
#: What this mapping was checked against (module docstring has the sources).
MAPPED: Final = (
    "codex-rs/hooks after PR #22873 (SubagentStop, May 2026); hooks docs of 2026-05-18; "
    "Stop output (decision/reason) as in codex-rs/hooks/src/events/stop.rs, December 2026"
)

#: The hook whose decision Codex reads back (hookSpecificOutput.hookEventName).
PERMISSION_REQUEST: Final = "PermissionRequest"
#: The hook held in away mode: its answer is the agent's next instruction (issue 33).
STOP: Final = "Stop"
#: The hooks the daemon holds while the person is away (issue 33); it asks the chat its
#: generic question (agents/steer.py) and prints `hook_output` of the answer.
STEERED_HOOKS: Final = frozenset({STOP})
#: Codex's cap on Stop blocks in a row: none (0). Claude Code stops honouring blocks after
#: CLAUDE_CODE_STOP_HOOK_BLOCK_CAP of them; Codex's Stop handler counts nothing.
STOP_BLOCK_CAP: Final = 0
#: The deny message when the human denied without words.
DEFAULT_DENY_MESSAGE: Final = DENY_MESSAGE
#: what "for this session" grants on Codex, in the words of its button
SESSION_LABEL: Final = "Allow this exact call for this session"


def identity(payload: Any) -> tuple[str | None, str | None]:
    """(AEP session, AEP run): Codex's thread `session_id` and its `turn_id`."""
    if not isinstance(payload, dict):
        return None, None
    return text_of(payload.get("session_id")), text_of(payload.get("turn_id"))


def map_hook(payload: Any, ceiling: Ceiling = DEFAULT_CEILING) -> list[Emission]:
    """The events one Codex hook payload becomes, at most `ceiling`; `[]` for junk."""
    return map_named(
        payload,
        AGENT,
        _MAPPERS,
        lambda mapper, hook: mapper(hook, ceiling, text_of(hook.get("turn_id"))),
    )


def hook_output(payload: Any, verdict: Verdict | None) -> dict[str, Any] | None:
    """The JSON a held `PermissionRequest` (or a held `Stop`: `stop_output`) hook prints for
    Codex, None to print nothing.

    Wire shape (`PermissionRequestCommandOutputWire` in codex-rs/hooks/src/schema.rs, and the
    hooks docs): `{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision":
    {"behavior": "allow" | "deny", "message"?: str}}}`. Printing nothing lets Codex fall back to
    its own approval prompt (no verdict, a timeout, an option we do not know).
    `allow_session` is a plain allow: `updatedPermissions` is reserved and fails closed in
    Codex, so the session rule lives in the daemon (`session_rule_key`).
    """
    if verdict is None or not isinstance(payload, dict):
        return None
    if payload.get("hook_event_name") == STOP:
        return stop_output(verdict)
    if payload.get("hook_event_name") != PERMISSION_REQUEST:
        return None
    if verdict.option in (ALLOW, ALLOW_SESSION):
        decision: dict[str, Any] = {"behavior": "allow"}
    elif verdict.option == DENY or (verdict.option is None and text_of(verdict.text)):
        decision = {"behavior": "deny", "message": text_of(verdict.text) or DEFAULT_DENY_MESSAGE}
    else:
        return None
    return {"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": decision}}


def stop_output(verdict: Verdict | None) -> dict[str, Any] | None:
    """What a held Stop hook prints for Codex: the words as its next instruction, or
    nothing (Done, a timeout, no answer: the turn ends as it would have)."""
    if verdict is None or verdict.option is not None:
        return None
    words = text_of(verdict.text)
    if words is None or not words.strip():  # Codex fails a block with a blank reason
        return None
    return {"decision": "block", "reason": words}


def session_rule_key(payload: Any) -> str | None:
    """What "allow for this session" covers on Codex: this tool with exactly this input, in
    this working folder, again (`rm -rf build` elsewhere is another call)."""
    if not isinstance(payload, dict) or payload.get("hook_event_name") != PERMISSION_REQUEST:
        return None
    call = {"tool_input": payload.get("tool_input"), "cwd": payload.get("cwd")}
    return f"{tool_name(payload)}:{digest(call)}"


def session_grants(payload: Any) -> list[Grant]:
    """The one "for this session" option of a Codex `PermissionRequest`: the daemon's rule
    for this exact call (`session_rule_key`); Codex's answer itself carries no rule."""
    if session_rule_key(payload) is None:
        return []
    return [Grant(ALLOW_SESSION, SESSION_LABEL, SESSION_LABEL)]


# -- the hooks ------------------------------------------------------------------------------


def _session_start(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    data: dict[str, Any] = {"client": {"name": AGENT}}
    _put(data, "trigger", text_of(payload.get("source")))
    _put(data, "gen_ai.request.model", text_of(payload.get("model")))
    _put(data, "cwd", text_of(payload.get("cwd")))
    return [emission("session.started", data, ceiling, run=run)]


def _prompt_submit(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    data: dict[str, Any] = {"trigger": "user"}
    _put(data, "prompt", text_of(payload.get("prompt")))
    return [emission("run.started", data, ceiling, run=run)]


def _stop(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    data: dict[str, Any] = {}
    _put(data, "summary", text_of(payload.get("last_assistant_message")))
    return [emission("run.finished", data, ceiling, run=run)]


def _pre_tool_use(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    return [tool_event("tool.requested", payload, ceiling, run=run)]


def _post_tool_use(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    return [tool_event("tool.completed", payload, ceiling, run=run)]


def _permission_request(
    payload: dict[str, Any], ceiling: Ceiling, run: str | None
) -> list[Emission]:
    return [permission_request(AGENT, payload, ceiling, run=run)]


def _subagent_start(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    return [_subagent("delegation.subagent.started", payload, ceiling, run)]


def _subagent_stop(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    return [_subagent("delegation.subagent.stopped", payload, ceiling, run)]


def _pre_compact(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    """Nothing: `session.compacted` fires once, at `PostCompact` (documented deviation)."""
    return []


def _post_compact(payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> list[Emission]:
    data: dict[str, Any] = {}
    _put(data, "trigger", text_of(payload.get("trigger")))
    return [emission("session.compacted", data, ceiling, run=run)]


_MAPPERS: Final = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt_submit,
    "Stop": _stop,
    "PreToolUse": _pre_tool_use,
    "PostToolUse": _post_tool_use,
    PERMISSION_REQUEST: _permission_request,
    "SubagentStart": _subagent_start,
    "SubagentStop": _subagent_stop,
    "PreCompact": _pre_compact,
    "PostCompact": _post_compact,
}


# -- helpers --------------------------------------------------------------------------------


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        data[key] = value


def _subagent(type_: str, payload: dict[str, Any], ceiling: Ceiling, run: str | None) -> Emission:
    data: dict[str, Any] = {}
    _put(data, "agent_type", text_of(payload.get("agent_type")))
    subject = text_of(payload.get("agent_id"))
    return emission(type_, data, ceiling, subject=subject, run=run)


__all__ = [
    "AGENT",
    "DEFAULT_DENY_MESSAGE",
    "MAPPED",
    "STEERED_HOOKS",
    "STOP",
    "STOP_BLOCK_CAP",
    "hook_output",
    "identity",
    "map_hook",
    "session_grants",
    "session_rule_key",
    "stop_output",
]

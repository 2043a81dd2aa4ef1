"""Claude Code hooks -> AEP events (AEP-0002 Annex A.1), and the answers back.

Pure: a hook payload in, `Emission`s out; `hook_output` turns a held hook's verdict into
the JSON Claude Code reads on the hook's stdout. The daemon owns identity and state.

Mapped against Claude Code 2.1.240 (`MAPPED`), checked field by field on 2026-12-02
against the official hooks reference, https://code.claude.com/docs/en/hooks, as mirrored
in zhalice2011/claude-code-docs `docs/hooks.md` at 19dd01f (2026-08-22; its changelog
tops at 2.1.240; the same text is in llms-txt-archive/anthropic-claude-code
`docs/en/hooks.md`, 2026-08-21). "Ref" below is that page, by section:

- Common input fields: `session_id`, `transcript_path`, `cwd`, `permission_mode` (not on
  every event), `hook_event_name`; also `prompt_id` (2.1.196+), `effort`, and `agent_id` /
  `agent_type` inside a subagent. Only `session_id` and `hook_event_name` are read here.
- SessionStart input: `source` (`startup`, `resume`, `clear`, `compact`, and `fork` since
  2.1.214), optional `model`, `agent_type`, `session_title`.
- UserPromptSubmit input: `prompt`.
- PreToolUse input: `tool_name`, `tool_input`, `tool_use_id`. PostToolUse adds
  `tool_response` (and optional `duration_ms`, not carried). PostToolUseFailure: `error`
  (a string, `Exit code N` first for Bash), optional `is_interrupt`, `duration_ms`.
- PermissionRequest input: `tool_name`, `tool_input`, NO `tool_use_id`, optional
  `permission_suggestions` (Ref "Permission update entries": `type` one of `addRules`,
  `replaceRules`, `removeRules` with `rules[{toolName, ruleContent?}]` + `behavior`,
  `setMode` with `mode`, `addDirectories` / `removeDirectories` with `directories`; every
  entry has a `destination`: `session`, `localSettings`, `projectSettings`,
  `userSettings`). Decision (Ref "PermissionRequest decision control"):
  `hookSpecificOutput: {hookEventName: "PermissionRequest", decision: {behavior}}`, with
  `updatedInput` and `updatedPermissions` for allow only, `message` (and `interrupt`, not
  used) for deny only. "A hook can echo one of the permission_suggestions it received as
  its own updatedPermissions output."
- PermissionDenied input: `tool_name`, `tool_input`, `tool_use_id`, `reason`. Fires only
  for auto-mode denials (not a person's deny, not a deny rule or a PreToolUse block).
- Notification input: `message`, optional `title`, `notification_type`: `permission_prompt`,
  `idle_prompt`, `auth_success`, `elicitation_dialog`, `elicitation_url_dialog`,
  `elicitation_complete`, `elicitation_response`, `agent_needs_input`, `agent_completed`;
  a later copy of the official hooks guide (code.claude.com/docs/en/hooks-guide, "Get
  notified when Claude needs input"; it names 2.1.246, found in the search index, its
  mirror not identified) adds `quota_auto_resume_fired`, `quota_auto_resume_stale` and
  `quota_auto_resume_disabled` (2.1.234+).
- Stop input: `stop_hook_active`, `last_assistant_message`, `background_tasks`,
  `session_crons` (`last_assistant_message` read for the held Stop, steer.py). Decision
  (Ref "Stop decision control"): `{"decision": "block", "reason": ...}` keeps Claude going,
  the reason its next instruction; no output lets it stop. The next Stop of that turn
  carries `stop_hook_active: true`. Claude Code ends the turn itself after
  `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP` blocks in a row (8 by default; added in 2.1.143,
  documented on the hooks page and the env-vars reference by 2.1.257, per
  anthropics/claude-code#59583 and #85547); a continuation that ran a tool counts from zero
  again (read from the 2.1.220 binary by daymade/claude-code-skills#245, not in the docs),
  and 0 turns the cap off. The hook inherits Claude Code's environment, settings `env`
  included, which is how the daemon learns the cap in force.
  StopFailure input: `error` (`rate_limit`, `overloaded`,
  `authentication_failed`, `oauth_org_not_allowed`, `billing_error`, `invalid_request`,
  `model_not_found`, `server_error`, `max_output_tokens`, `unknown`), optional
  `error_details`, `last_assistant_message`.
- SubagentStart input: `agent_id`, `agent_type`; SubagentStop adds `stop_hook_active`,
  `agent_transcript_path`, `last_assistant_message`, `background_tasks`, `session_crons`.
- PreCompact input: `trigger` (`manual`, `auto`), `custom_instructions`. PostCompact:
  `trigger`, `compact_summary`.
- SessionEnd input: `reason`: `clear`, `resume`, `logout`, `prompt_input_exit`, `other`;
  `bypass_permissions_disabled` was removed in 2.1.234 (older builds may still send it).
- Elicitation input: `mcp_server_name`, `message`, optional `mode` (`form` / `url`), `url`,
  `elicitation_id`, `requested_schema`. Output: `hookSpecificOutput: {hookEventName:
  "Elicitation", action: "accept" | "decline" | "cancel", content?}` (content only with
  accept). ElicitationResult input: `mcp_server_name`, `action`, optional `mode`,
  `elicitation_id`, `content` (read by the daemon, which settles a pending elicitation).
- AskUserQuestion `tool_input` (Ref "PreToolUse input"): `questions[]` (`question`,
  `header`, `options[{label, description?}]`, `multiSelect?`) and an optional `answers`
  object, "question text -> selected option label, multi-select answers join labels with
  commas; Claude doesn't set this field; supply it via `updatedInput` to answer
  programmatically". The reference spells the round trip out for PreToolUse
  (`permissionDecision: "allow"` + `updatedInput` echoing `questions` and adding `answers`,
  changelog 2.1.85); for PermissionRequest it says only that `decision.updatedInput`
  replaces the tool's input on allow and that the hook matches the same tool names as
  PreToolUse (AskUserQuestion among them). This module answers from PermissionRequest
  with the same `updatedInput` shape; the page does not say so in as many words.

The Agent SDK's TypeScript hook input types (`@anthropic-ai/claude-agent-sdk`, reference
page of the same mirror) agree with every name above.

Every payload carries `session_id` and `hook_event_name`. Claude Code names no run that
every build sends (`prompt_id`, 2.1.196+, is absent before the first prompt and on older
builds): the daemon opens a run at `UserPromptSubmit` and closes it at
`Stop`/`StopFailure`, so `identity` returns no run.

| Hook (fields read)                                   | Event                          |
|------------------------------------------------------|--------------------------------|
| SessionStart (`source`, `model`, `cwd`)              | session.started                |
| UserPromptSubmit (`prompt`)                          | run.started, trigger `user`    |
| PreToolUse (`tool_name`, `tool_input`, `tool_use_id`)| tool.requested, args_digest    |
| PostToolUse (+ `tool_response`)                      | tool.completed, result_digest  |
| PostToolUseFailure (+ `error`, `is_interrupt`)       | tool.failed                    |
| PermissionRequest (`tool_name`, `tool_input`,        | attention.requested permission |
|   `permission_suggestions`)                          |   (AskUserQuestion: form)      |
| PermissionDenied (`tool_name`, `tool_use_id`)        | tool.denied, by `policy`       |
| Notification (`notification_type`, `message`)        | see below                      |
| Stop (`last_assistant_message`)                      | run.finished; while away, the  |
|                                                      |   held "what next?" (steer.py) |
|                                                      |   first, run.finished only if  |
|                                                      |   the agent then stops         |
| StopFailure (`error`, `error_details`)               | run.failed                     |
| SubagentStart / SubagentStop (`agent_id`,            | delegation.subagent.started /  |
|   `agent_type`)                                      |   .stopped, subject agent_id   |
| PreCompact                                           | nothing (deviation, below)     |
| PostCompact (`trigger`)                              | session.compacted              |
| SessionEnd (`reason`)                                | session.ended                  |
| Elicitation (`mcp_server_name`, `message`, `mode`,   | attention.requested form       |
|   `requested_schema`)                                |   (url mode: kind auth, oob)   |
| ElicitationResult                                    | nothing here (daemon settles)  |
| any other hook                                       | x.claude-code.session.<name>   |

Notification by `notification_type`: the types that echo a hook mapped here emit nothing
(one card per question): `permission_prompt` (PermissionRequest), `elicitation_dialog` and
`elicitation_url_dialog` (Elicitation), `elicitation_complete` and `elicitation_response`
(ElicitationResult). The types that say the agent waits for the person at its terminal
are a heads-up, `attention.requested` kind `input` with `respond_via: ["oob"]`:
`idle_prompt`, and `quota_auto_resume_stale` (the usage limit reset while the computer
slept, Claude Code waits for Enter). Any other type (`auth_success`, `agent_completed`,
`agent_needs_input`, which is about another, background session, ...) is
`progress.status` with `phase` = the type and the message gated.

Deviations from Annex A and choices, on purpose:

- `PreCompact` emits nothing; `session.compacted` fires once, at `PostCompact` (the same
  deviation as the Codex mapping and the reference adapters).
- `AskUserQuestion` arrives as a PermissionRequest but is the agent asking, not a gate: it
  becomes one `kind: "form"` request (AEP-0006, `forms.ask_user_question`), not
  `kind: "permission"`. Its PreToolUse/PostToolUse still map to the tool events.
- The permission card offers `allow` and `deny`, and between them one option for each
  kind of Claude Code's own "always allow" suggestions that fits (grants.py, issue 30): an
  allow rule for this tool ("Allow Bash(npm test:*) for this session"), a mode ("Allow and
  switch this session to acceptEdits mode"), working folders ("Allow and add folder /etc
  for this session"). Pressing one returns exactly that ONE suggestion, its `destination`
  set to `session` (`updatedPermissions`), as the reference allows ("echo one of the
  permission_suggestions"). No suggestion that fits: no "for this session" option.
- SessionEnd reasons: `clear`, `resume`, `logout`, `prompt_input_exit` and `other` are a
  normal end (`normal`); `bypass_permissions_disabled` (builds before 2.1.234) is the
  runtime ending the session (`killed`); an unknown reason is left out rather than guessed.
- SessionStart `source` is `session.started.trigger` as is (`fork` included), as the
  Codex pin does with its own `source`.
- StopFailure: `error` is `run.failed.reason` and `error.type` (a structural code such as
  `rate_limit`; `unknown` when absent), `error_details` the gated `error.message`.
- PermissionDenied is the auto-mode classifier refusing a call: `tool.denied` by `policy`.
  Its free-text `reason` has no structural slot and is not carried.
- ElicitationResult: the pure mapping emits nothing. When an Elicitation request is still
  pending the daemon settles it from this hook (`attention.answered` via `oob`, then
  `attention.resolved`); an orphan result emits nothing (one terminal per request).
- Elicitation in `url` mode cannot be answered from a chat (the person must open the URL):
  an `attention.requested` kind `auth`, `respond_via: ["oob"]`, the URL not carried.
- PermissionRequest names no call (no `tool_use_id`): the daemon sets the request's `cause`
  to the `tool.requested` of the open call with the same tool and input (calls.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..aep.capture import synthesize_prompt
from ..aep.registry import CAPTURE_RANK
from . import forms
from .grants import Grant, chosen, claude_code_grants
from .mapping import (
    ALLOW,
    DEFAULT_CEILING,
    DENY,
    DENY_MESSAGE,
    Ceiling,
    Emission,
    Verdict,
    emission,
    map_named,
    permission_request,
    text_of,
    tool_event,
    tool_of,
)

AGENT: Final = "claude-code"
MAPPED: Final = "Claude Code 2.1.240 hooks reference (code.claude.com/docs/en/hooks, 2026-08-22)"
ASK_USER_QUESTION: Final = "AskUserQuestion"
#: hooks the daemon holds while the person is away, for their next instruction (steer.py)
STEERED_HOOKS: Final = frozenset({"Stop"})

#: Shown as the reason when a human denies with no words of their own.
DEFAULT_DENY_MESSAGE: Final = DENY_MESSAGE

_SESSION_END: Final = {
    "clear": "normal",
    "resume": "normal",
    "logout": "normal",
    "prompt_input_exit": "normal",
    "other": "normal",
    "bypass_permissions_disabled": "killed",
}
#: Notifications that echo a hook mapped here (one card per question): nothing to emit.
_QUIET_NOTIFICATIONS: Final = frozenset(
    {
        "permission_prompt",
        "elicitation_dialog",
        "elicitation_url_dialog",
        "elicitation_complete",
        "elicitation_response",
    }
)
#: Notifications that mean the agent waits for the person at its terminal: a heads-up.
_WAITING_NOTIFICATIONS: Final = frozenset({"idle_prompt", "quota_auto_resume_stale"})

Handler = Callable[[dict[str, Any], Ceiling], list[Emission]]


def identity(payload: Any) -> tuple[str | None, str | None]:
    """(session, run): Claude Code's `session_id`, and no run (the daemon tracks turns)."""
    return (text_of(payload.get("session_id")) if isinstance(payload, dict) else None), None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _session_start(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    data: dict[str, Any] = {"client": {"name": AGENT}}
    for key, target in (("source", "trigger"), ("model", "gen_ai.request.model"), ("cwd", "cwd")):
        value = text_of(payload.get(key))
        if value is not None:
            data[target] = value
    return [emission("session.started", data, ceiling)]


def _prompt_submit(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    data: dict[str, Any] = {"trigger": "user"}
    prompt = text_of(payload.get("prompt"))
    if prompt is not None:
        data["prompt"] = prompt
    return [emission("run.started", data, ceiling)]


def _pre_tool(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    return [tool_event("tool.requested", payload, ceiling)]


def _post_tool(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    return [tool_event("tool.completed", payload, ceiling)]


def _tool_failure(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    tool = tool_of(payload)
    error: dict[str, Any] = {
        "type": "interrupted" if payload.get("is_interrupt") is True else "tool_error"
    }
    message = text_of(payload.get("error"))
    if message is not None:
        error["message"] = message
    data = {"tool": tool, "error": error}
    return [emission("tool.failed", data, ceiling, subject=tool["name"])]


def _permission_denied(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    tool = tool_of(payload)
    data = {"tool": tool, "by": "policy"}
    return [emission("tool.denied", data, ceiling, subject=tool["name"])]


def _attention(
    data: dict[str, Any], ceiling: Ceiling, subject: str | None, synthesized: str
) -> Emission:
    """An `attention.requested` whose prompt becomes `synthesized` below `redacted` (§9.2)."""
    if CAPTURE_RANK[ceiling.attention] < CAPTURE_RANK["redacted"]:
        data = {**data, "prompt": synthesized}
    return emission("attention.requested", data, ceiling, subject=subject, severity="notice")


def _form(data: dict[str, Any], ceiling: Ceiling, subject: str | None) -> Emission:
    """A form already built at the attention ceiling by `forms`."""
    return Emission("attention.requested", data, subject, ceiling.attention, "notice")


def _permission_request(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    tool = text_of(payload.get("tool_name"))
    if tool is None:
        return []
    tool_input = payload.get("tool_input")
    if tool == ASK_USER_QUESTION:
        data = forms.ask_user_question(tool_input, ceiling.attention, ceiling.redactor, agent=AGENT)
        return [_form(data, ceiling, ASK_USER_QUESTION)]
    return [permission_request(AGENT, payload, ceiling)]


def _notification(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    kind = text_of(payload.get("notification_type"))
    if kind in _QUIET_NOTIFICATIONS:
        return []
    if kind in _WAITING_NOTIFICATIONS:
        prompt = f"{AGENT} is waiting for your input"
        data = {"kind": "input", "prompt": prompt, "respond_via": ["oob"]}
        return [_attention(data, ceiling, None, prompt)]
    status: dict[str, Any] = {}
    if kind is not None:
        status["phase"] = kind
    message = text_of(payload.get("message"))
    if message is not None:
        status["message"] = message
    return [emission("progress.status", status, ceiling)]


def _stop(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    return [emission("run.finished", {}, ceiling)]


def _stop_failure(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    code = text_of(payload.get("error")) or "unknown"
    error: dict[str, Any] = {"type": code}
    details = text_of(payload.get("error_details"))
    if details is not None:
        error["message"] = details
    return [emission("run.failed", {"reason": code, "error": error}, ceiling, severity="error")]


def _subagent(type_: str) -> Handler:
    def handle(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
        data: dict[str, Any] = {}
        agent_type = text_of(payload.get("agent_type"))
        if agent_type is not None:
            data["agent_type"] = agent_type
        subject = text_of(payload.get("agent_id"))
        return [emission(type_, data, ceiling, subject=subject)]

    return handle


def _nothing(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    return []


def _post_compact(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    trigger = text_of(payload.get("trigger"))
    data = {"trigger": trigger} if trigger is not None else {}
    return [emission("session.compacted", data, ceiling)]


def _session_end(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    reason = _SESSION_END.get(str(payload.get("reason")))
    return [emission("session.ended", {"reason": reason} if reason else {}, ceiling)]


def _elicitation(payload: dict[str, Any], ceiling: Ceiling) -> list[Emission]:
    server = text_of(payload.get("mcp_server_name"))
    message = payload.get("message")
    if payload.get("mode") == "url":
        synthesized = synthesize_prompt(AGENT, "auth", server)
        prompt = text_of(message) or synthesized
        data: dict[str, Any] = {"kind": "auth", "prompt": prompt, "respond_via": ["oob"]}
        return [_attention(data, ceiling, server, synthesized)]
    schema = payload.get("requested_schema")
    data = forms.elicitation(message, schema, ceiling.attention, ceiling.redactor, agent=AGENT)
    return [_form(data, ceiling, server)]


_HANDLERS: Final[dict[str, Handler]] = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt_submit,
    "PreToolUse": _pre_tool,
    "PostToolUse": _post_tool,
    "PostToolUseFailure": _tool_failure,
    "PermissionRequest": _permission_request,
    "PermissionDenied": _permission_denied,
    "Notification": _notification,
    "Stop": _stop,
    "StopFailure": _stop_failure,
    "SubagentStart": _subagent("delegation.subagent.started"),
    "SubagentStop": _subagent("delegation.subagent.stopped"),
    "PreCompact": _nothing,  # deviation: session.compacted fires once, at PostCompact
    "PostCompact": _post_compact,
    "SessionEnd": _session_end,
    "Elicitation": _elicitation,
    "ElicitationResult": _nothing,  # the daemon settles a pending elicitation from it
}


def map_hook(payload: Any, ceiling: Ceiling = DEFAULT_CEILING) -> list[Emission]:
    """The events one Claude Code hook payload stands for (none for a malformed one)."""
    return map_named(payload, AGENT, _HANDLERS, lambda handler, hook: handler(hook, ceiling))


def session_grants(payload: Any) -> list[Grant]:
    """The "for this session" options this `PermissionRequest` offers, each standing for one
    of Claude Code's own suggestions re-scoped to the session (grants.py)."""
    return claude_code_grants(payload)


def _decision(decision: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def _deny(verdict: Verdict) -> dict[str, Any]:
    return _decision({"behavior": "deny", "message": text_of(verdict.text) or DEFAULT_DENY_MESSAGE})


def _question_output(payload: dict[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    tool_input = _dict(payload.get("tool_input"))
    values = verdict.values
    if values is None and verdict.option is None and text_of(verdict.text):
        # AEP-0006 degradation: a plain text answer to a one-question call is its answer.
        questions = tool_input.get("questions")
        if isinstance(questions, list) and len(questions) == 1:
            values = {"1": verdict.text}
    if values is not None:
        answers = forms.ask_user_question_answers(tool_input, values)
        return _decision({"behavior": "allow", "updatedInput": {**tool_input, "answers": answers}})
    if verdict.option == DENY:
        return _deny(verdict)
    return None


def _permission_output(payload: dict[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    if text_of(payload.get("tool_name")) == ASK_USER_QUESTION:
        return _question_output(payload, verdict)
    if verdict.option == ALLOW:
        return _decision({"behavior": "allow"})
    grant = chosen(session_grants(payload), verdict.option)
    if grant is not None and grant.update is not None:
        # exactly the one suggestion the pressed option names, nothing wider
        return _decision({"behavior": "allow", "updatedPermissions": [grant.update]})
    if verdict.option == DENY or (verdict.option is None and text_of(verdict.text)):
        return _deny(verdict)
    return None


def _elicitation_output(payload: dict[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    if verdict.values is not None:
        content = forms.elicitation_content(payload.get("requested_schema"), verdict.values)
        action: dict[str, Any] = {"action": "accept", "content": content}
    elif verdict.option == DENY:
        action = {"action": "decline"}
    else:
        return None
    return {"hookSpecificOutput": {"hookEventName": "Elicitation", **action}}


def hook_output(payload: Any, verdict: Verdict | None) -> dict[str, Any] | None:
    """The stdout JSON for a held hook, or None: Claude Code then asks in its own dialog.

    PermissionRequest: `hookSpecificOutput.decision` with `behavior` allow/deny, `message`
    on deny, `updatedPermissions` with the one suggestion a "for this session" option
    stands for (an option this request does not offer gets None), `updatedInput` carrying the
    `answers` for AskUserQuestion. Elicitation: `hookSpecificOutput.action` (accept with
    `content`, or decline). Stop (held while the person is away, steer.py): an instruction
    is `{"decision": "block", "reason": <the words>}`; Done gets None, and the agent stops.
    """
    if verdict is None or not isinstance(payload, dict):
        return None
    name = payload.get("hook_event_name")
    if name == "PermissionRequest":
        return _permission_output(payload, verdict)
    if name == "Elicitation":
        return _elicitation_output(payload, verdict)
    if name == "Stop" and verdict.option is None and text_of(verdict.text):
        # the person's words are the next instruction (Ref "Stop decision control")
        return {"decision": "block", "reason": verdict.text}
    return None


__all__ = [
    "AGENT",
    "MAPPED",
    "STEERED_HOOKS",
    "hook_output",
    "identity",
    "map_hook",
    "session_grants",
]

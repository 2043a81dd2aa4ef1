"""The agent side: hook adapters that connect Claude Code and Codex to the bridge.

`aep-bridge hook AGENT` (shim.py) is the command an agent runs on each hook; it hands the
payload to the per-user daemon `aep-bridge agentd` (daemon.py), which maps it to AEP events
(codex.py, claude_code.py), keeps each session's log and position, holds permission prompts
open while a human answers from the chat, and talks to the bridge over one WebSocket.
`aep-bridge install AGENT` (install.py) writes the hook entries into a project.

This package imports nothing at import time: the hook command must start fast.
"""

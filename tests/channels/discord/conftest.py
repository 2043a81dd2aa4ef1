"""What every Discord test checks: discord.py logged no error (it logs what goes wrong in a
gateway event, a button's callback or a parse of the fake's payloads, and carries on)."""

from __future__ import annotations

from aep_bridge.testing import library_logs_nothing_wrong

_discord_logs_no_errors = library_logs_nothing_wrong("discord")

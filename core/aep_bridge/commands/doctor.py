"""A channel's platform side checked without running it: `aep-bridge doctor`, and the setup
wizards after they write a channel's block. One wording for both, every failure with its fix.
"""

from __future__ import annotations

from typing import Any

from ..config.config import ResolvedChannel
from ..text.scrub import scrub, secrets_in


class OfflineCore:
    """The core a channel gets for `doctor()`: it is checked, never run."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a channel's doctor() may not use the core ({name})")


async def check_channel(resolved: ResolvedChannel) -> tuple[int, list[str]]:
    """Run one channel's `doctor()`: how many checks failed, and the lines to show (the
    channel's name, then each check, a failure with its fix). A plugin's doctor that raises is
    one failure, not a crash: the other channels are still checked. Every line is scrubbed
    (`scrub.scrub`): no secret of the channel's config, no credentials in a URL, no bot token.
    """
    failed, lines = await _check_channel(resolved)
    secrets = secrets_in(resolved.config)
    return failed, [scrub(line, secrets) for line in lines]


async def _check_channel(resolved: ResolvedChannel) -> tuple[int, list[str]]:
    lines = [f"{resolved.name}:"]
    try:
        adapter = resolved.registration.factory(OfflineCore(), resolved.config)
        checks = list(await adapter.doctor())
    except Exception as exc:
        return 1, [*lines, f"  FAIL  {type(exc).__name__}: {exc}"]
    if not checks:
        lines.append("  ok    nothing to check for this channel type")
    failed = 0
    for item in checks:
        lines.append(f"  {'ok  ' if item.ok else 'FAIL'}  {item.name}: {item.detail}")
        if not item.ok:
            failed += 1
            if item.fix:
                lines.append(f"        fix: {item.fix}")
    return failed, lines

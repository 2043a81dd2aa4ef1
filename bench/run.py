"""`make bench`: run every benchmark, print ratios against same-run baselines, record them.

Results go to bench/RESULTS.md (rewritten each run, with the machine it ran on). Numbers are
only compared within one run: a ratio against a baseline measured minutes apart on the same
machine means something, an absolute figure from another day does not.
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.official

import intake
import validation

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the goals say
    figures = validation.main()
    ours, schema, floor = figures["aep-bridge"], figures["jsonschema"], figures["json.loads"]
    lines = [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, pinned to one core. "
        "Regenerate with `make bench`.",
        "",
        "## Validation throughput (envelope + payload + stream rules)",
        "",
        validation.__doc__.strip().split("\n\n", 1)[1].replace("\n", " ")
        if validation.__doc__
        else "",
        "",
        "| what | events/s | vs jsonschema | vs json.loads |",
        "|---|---:|---:|---:|",
    ]
    for name, value in figures.items():
        lines.append(f"| {name} | {value:,.0f} | {value / schema:.1f}x | {value / floor:.2f}x |")
    lines += [
        "",
        f"Goals: at least 10x the jsonschema baseline ({_met(ours >= 10 * schema)}: "
        f"{ours / schema:.1f}x) and at least 30,000 events/s on one core "
        f"({_met(ours >= 30_000)}: {ours:,.0f}).",
        "",
    ]
    ingest = intake.main()
    profiles = {name: intake.profile(name) for name in intake.missed(ingest)}
    lines += intake.section(ingest, profiles)
    import outbox  # the outbox scheduler, on a simulated clock

    lines += outbox.section(outbox.main())
    import flood  # floods: new sessions against a question, a burst against the outbox

    lines += flood.section(flood.main())
    import core  # the core loop: throughput, attention latency, memory

    loop = core.main()
    lines += core.section(loop, {name: core.profile(name, loop) for name in core.missed(loop)})
    import hops  # the agent's WebSocket to the channel's call, hop by hop

    lines += hops.section(hops.main())
    import telegram_channel  # the Telegram channel: the real process, the fake Bot API

    lines += telegram_channel.section(telegram_channel.main())
    import rendering  # the reference session as the Telegram topic shows it

    lines += rendering.section(rendering.main())
    import discord_channel  # the Discord channel: the real process, the fake Discord

    lines += discord_channel.section(discord_channel.main())
    import discord_rendering  # the reference session as a Discord thread shows it

    lines += discord_rendering.section(discord_rendering.main())
    import slack_channel  # the Slack channel: the real process, the fake Slack

    lines += slack_channel.section(slack_channel.main())
    import slack_rendering  # the reference session as a Slack thread shows it

    lines += slack_rendering.section(slack_rendering.main())
    import realistic  # a realistic session on every channel: the same eight measures

    lines += realistic.section(realistic.main())
    import attacks  # attacks on the endpoint: never-reading consumers, idle connections

    lines += attacks.section(attacks.main())
    import agent_hooks  # the agent side: a hook call's cost, what the held loop adds

    lines += agent_hooks.section(agent_hooks.main())
    import steer  # steer from the chat: the held Stop's question to its card, words to answer

    lines += steer.section(steer.main())
    import web_channel  # the web channel in a real browser: request to card, click to command

    lines += web_channel.section(web_channel.main())
    import team_load  # a bridge a team shares: 50 agent connections, 500 sessions

    lines += team_load.section(team_load.main())
    import store_soak  # the store's disk use under a soak of short sessions

    lines += store_soak.section(store_soak.main())
    import store_bounds  # the whole store with every bound on, over a longer soak

    lines += store_bounds.section(store_bounds.main())
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""A consumer process for the fault tests: a `RelayClient` whose every effect is one row.

    python tests/intake/relay_consumer.py URL STATE_DIR [NAME]

The relay's token comes from `AEP_RELAY_TOKEN` (never the command line, which `ps` shows).
For each event it keeps the consumer's side of the contract, in ONE `store.transaction()`:
`store.record_delivery(...)` and an insert of the event id into `deliveries`, a table of
its own in the same SQLite file with no unique constraint. So a duplicate the client hands
out shows up as a second row, and an event lost shows up as a missing one: the tests count
rows and distinct ids after killing this process, the relay, or both.

The insert is deliberately unconditional (not `if store.record_delivery(...)`): the client
promises never to hand out an event the store has seen, and this is how that is checked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from aep_bridge.intake.relay import RelayClient
from aep_bridge.store import Store


async def consume(url: str, token: str, state_dir: Path, name: str) -> None:
    store = Store.open(state_dir)
    # the effects must commit with `record_delivery` or not at all
    store.execute(
        "CREATE TABLE IF NOT EXISTS deliveries (n INTEGER PRIMARY KEY, event_id TEXT NOT NULL)"
    )
    client = RelayClient(url, token, store, name=name, backoff=(0.05, 0.5))
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        async for event in client.events():
            with store.transaction():
                store.record_delivery(client.name, event)
                store.execute("INSERT INTO deliveries (event_id) VALUES (?)", (event.id,))
    except asyncio.CancelledError:
        pass  # SIGTERM: an orderly stop
    finally:
        await client.close()
        store.close()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s consumer %(levelname)s %(message)s",
    )
    url, state_dir = sys.argv[1], Path(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) > 3 else "fault-consumer"
    asyncio.run(consume(url, os.environ["AEP_RELAY_TOKEN"], state_dir, name))


if __name__ == "__main__":
    main()

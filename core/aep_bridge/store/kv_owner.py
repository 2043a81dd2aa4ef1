"""Which session a channel's key is about (`kv.session_id`): the rule `kv.KvTables.
channel_kv_set` applies to every write, and the migration that tagged the keys written
before it (schema version 11) to each row; see `kv` for why."""

from __future__ import annotations

from typing import Final

#: Values longer than this are not compared with ids (the core's are some 11 to 17 characters;
#: a plugin's card ids may be longer).
MAX_ID: Final = 256
#: The session a channel's key is about (see the module), if any: `?1` the id in its name
#: (`key_id`), `?2` its value. Migration 11 applies the same rule, written out.
OWNER: Final = (
    "coalesce((SELECT id FROM sessions WHERE id = ?1), "
    "(SELECT session_id FROM requests WHERE id = ?1), "
    "(SELECT id FROM sessions WHERE id = ?2), "
    "(SELECT session_id FROM requests WHERE id = ?2))"
)


def key_id(key: str) -> str:
    """The part of a channel's key that may be an id: after the first `:` up to the next
    (`card:c12`, `key:s34:status`), or the whole key when it has no `:`. The SQL function
    `aep_kv_key_id` of the migration that tagged the keys written before it."""
    head, colon, rest = key.partition(":")
    return rest.partition(":")[0] if colon else head


__all__ = ["MAX_ID", "OWNER", "key_id"]

"""The bridge's embedded SQLite store: one connection, its migrations, and a module per table family.

Nothing outside this package writes SQL: the rest of the core calls the typed methods here.
"""

from __future__ import annotations

from .database import (
    DB_NAME,
    MIGRATIONS,
    Floors,
    Position,
    Store,
    StoreError,
    StoreState,
    default_state_dir,
    floor_of,
)

__all__ = [
    "DB_NAME",
    "MIGRATIONS",
    "Floors",
    "Position",
    "Store",
    "StoreError",
    "StoreState",
    "default_state_dir",
    "floor_of",
]

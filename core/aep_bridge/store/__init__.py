"""The bridge's embedded SQLite store: one connection, its migrations, a module per table family.

Nothing outside this package writes SQL: the rest of the core calls the typed methods here.
`Store` is the connection (`database.Database`) with every table family's methods.
"""

from __future__ import annotations

from .approvals import ApprovalTables
from .audit import AuditRow, AuditTables
from .database import DB_NAME, Database, StoreError, default_state_dir, is_damage
from .delivery import DeliveryTables, Floors, Position, floor_of
from .kv import SECRETS_NAMESPACE, KvTables, StoreState
from .replay import ReplayTables
from .requests import RequestTables
from .schema import MIGRATIONS
from .sessions import SessionTables
from .tokens import TokenExists, TokenRow, TokenTables


class Store(
    DeliveryTables,
    SessionTables,
    RequestTables,
    ApprovalTables,
    ReplayTables,
    KvTables,
    AuditTables,
    TokenTables,
):
    """The bridge's state on disk. Open it with `Store.open(state_dir)`; see `Database` for
    its transactions and each table family's module for its methods."""


__all__ = [
    "DB_NAME",
    "MIGRATIONS",
    "SECRETS_NAMESPACE",
    "AuditRow",
    "Database",
    "Floors",
    "Position",
    "Store",
    "StoreError",
    "StoreState",
    "TokenExists",
    "TokenRow",
    "default_state_dir",
    "floor_of",
    "is_damage",
]

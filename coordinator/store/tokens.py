"""Bearer tokens: random secrets handed out once, stored only as their SHA-256."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from .db import Database, Row
from .dialect import Connection

TOKEN_PREFIX = "astr_"  # noqa: S105 - a prefix, not a secret


class Role(StrEnum):
    ADMIN = "admin"
    MEMBER = "member"
    AGENT = "agent"


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for."""

    token_id: int
    role: Role
    workspace: str | None = None
    machine: str | None = None


@dataclass(frozen=True)
class TokenInfo:
    id: int
    role: Role
    workspace: str | None
    machine: str | None
    description: str
    created_at: str

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "role": self.role.value,
            "workspace": self.workspace,
            "machine": self.machine,
            "description": self.description,
            "created_at": self.created_at,
        }


def digest(token: str) -> str:
    # The tokens are 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    def __init__(self, database: Database) -> None:
        self._database = database

    def create(
        self,
        role: Role,
        now: datetime,
        *,
        workspace: str | None = None,
        machine: str | None = None,
        description: str = "",
    ) -> tuple[str, TokenInfo]:
        """A new token: the secret (shown once) and what is stored about it."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._database.write() as conn:
            cursor = conn.execute(
                "INSERT INTO tokens (hash, role, workspace, machine, description, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (digest(secret), role.value, workspace, machine, description, now.isoformat()),
            )
            token_id = int(cursor.fetchone()[0])
        info = TokenInfo(token_id, role, workspace, machine, description, now.isoformat())
        return secret, info

    def authenticate(self, secret: str) -> Principal | None:
        row = self._database.read_one(
            "SELECT id, role, workspace, machine FROM tokens WHERE hash = ?", (digest(secret),)
        )
        if row is None:
            return None
        return Principal(row["id"], Role(row["role"]), row["workspace"], row["machine"])

    def all(self) -> list[TokenInfo]:
        return [_info(row) for row in self._database.read("SELECT * FROM tokens ORDER BY id")]

    def revoke(self, token_id: int) -> bool:
        with self._database.write() as conn:
            cursor = conn.execute("DELETE FROM tokens WHERE id = ?", (token_id,))
        return cursor.rowcount > 0

    @staticmethod
    def revoke_agents_of(conn: Connection, machine: str) -> int:
        """Every agent token of `machine`, revoked inside the caller's transaction; returns how
        many."""
        cursor = conn.execute("DELETE FROM tokens WHERE role = 'agent' AND machine = ?", (machine,))
        return cursor.rowcount

    def count(self) -> int:
        row = self._database.read_one("SELECT count(*) AS n FROM tokens")
        return int(row["n"]) if row else 0


def _info(row: Row) -> TokenInfo:
    return TokenInfo(
        row["id"],
        Role(row["role"]),
        row["workspace"],
        row["machine"],
        row["description"],
        row["created_at"],
    )

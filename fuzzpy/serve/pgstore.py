"""The PostgreSQL store: the same registry as `SqliteStore` beside the PostgreSQL ledger
(`fuzzpy.ledger.postgres`), for a service that runs as several processes or on several hosts
(docs/serve.md, "PostgreSQL").  The caps and charges, and their soundness, are the ledger's;
this module adds the tables of datasets and analysts.  Needs psycopg 3
(`pip install "fuzzpy[postgres]"`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..ledger.postgres import PostgresLedger
from .store import AnalystRecord, DatasetRecord

_REGISTRY = (
    """CREATE TABLE IF NOT EXISTS fuzzpy_serve_datasets (
        name TEXT PRIMARY KEY, data_path TEXT NOT NULL, schema_name TEXT NOT NULL,
        schema_source TEXT NOT NULL, identity TEXT NOT NULL, registered_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fuzzpy_serve_analysts (
        name TEXT PRIMARY KEY, token_hash TEXT NOT NULL, role TEXT NOT NULL, created_at TEXT NOT NULL)""",
)


class PostgresStore(PostgresLedger):
    """The PostgreSQL ledger (caps, charges: `charge_many`, `finish_many`, `set_cap`, `cap_of`,
    `usage`, `entries`) plus the service's registry of datasets and analysts."""

    def __init__(self, url: str) -> None:
        super().__init__(url, _REGISTRY)

    # -- the registry ---------------------------------------------------------------------------

    def put_dataset(self, rec: DatasetRecord) -> None:
        self.transaction(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_serve_datasets (name, data_path, schema_name, schema_source, identity, registered_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET data_path = EXCLUDED.data_path, "
            "schema_name = EXCLUDED.schema_name, schema_source = EXCLUDED.schema_source, "
            "identity = EXCLUDED.identity, registered_at = EXCLUDED.registered_at",
            (rec.name, rec.data_path, rec.schema_name, rec.schema_source, rec.identity, rec.registered_at)))

    def dataset(self, name: str) -> Optional[DatasetRecord]:
        def read(cur: Any) -> Optional[DatasetRecord]:
            cur.execute("SELECT name, data_path, schema_name, schema_source, identity, registered_at "
                        "FROM fuzzpy_serve_datasets WHERE name = %s", (name,))
            row = cur.fetchone()
            return DatasetRecord(*row) if row else None
        return self.transaction(read)

    def datasets(self) -> list[DatasetRecord]:
        def read(cur: Any) -> list[DatasetRecord]:
            cur.execute("SELECT name, data_path, schema_name, schema_source, identity, registered_at "
                        "FROM fuzzpy_serve_datasets ORDER BY name")
            return [DatasetRecord(*r) for r in cur.fetchall()]
        return self.transaction(read)

    def put_analyst(self, rec: AnalystRecord) -> None:
        self.transaction(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_serve_analysts (name, token_hash, role, created_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET token_hash = EXCLUDED.token_hash, role = EXCLUDED.role",
            (rec.name, rec.token_hash, rec.role, rec.created_at)))

    def analysts(self) -> list[AnalystRecord]:
        def read(cur: Any) -> list[AnalystRecord]:
            cur.execute("SELECT name, token_hash, role, created_at FROM fuzzpy_serve_analysts ORDER BY name")
            return [AnalystRecord(*r) for r in cur.fetchall()]
        return self.transaction(read)

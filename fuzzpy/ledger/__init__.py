"""The privacy-budget ledgers: what each dataset has spent, against its cap (docs/ledger.md).

`sqlite.Ledger` is the local ledger of `fuzzpy run` and the Python API (and the curator
service's default store); `postgres.PostgresLedger` keeps the same caps and charges in
PostgreSQL for a service of several processes.  Both compare caps with histories through
`caps.check_charge`, the one cap check.
"""

from .amounts import format_exact, parse_amount
from .caps import Usage, describe_cap
from .identity import dataset_identity, program_hash, short_id
from .sqlite import (
                     BUSY_TIMEOUT_S,
                     ENV_VAR,
                     FINISH_STATUSES,
                     Entry,
                     Ledger,
                     Restored,
                     default_ledger_path,
                     open_ledger,
                     restore_ledger,
)

__all__ = ["BUSY_TIMEOUT_S", "ENV_VAR", "FINISH_STATUSES", "Entry", "Ledger", "Usage", "dataset_identity",
           "default_ledger_path", "describe_cap", "format_exact", "open_ledger", "parse_amount",
           "program_hash", "Restored", "restore_ledger", "short_id"]

"""The charge stage, the one path by which any run spends budget: the command line, the Python
API, the Dask engine and the curator service all book a run through `charge`.

A run is booked with its whole loss (docs/ledger.md): the epsilon it states (at its delta when
it is not pure), its zCDP rho, and the `ProvenLoss` the accountant composes, on every account it
touches, in one transaction of the ledger, all or none.  The ledger's one cap check
(`fuzzpy.ledger.caps.check_charge`) then compares each capped account's composed history with
its cap, in the cap's notion (rule Notion, docs/soundness.md)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Optional, Protocol

from ..typesystem.sens import INF
from .guarantee import proven_loss


class Book(Protocol):
    """A ledger: the local SQLite ledger, or the curator's store (SQLite or PostgreSQL)."""

    def charge_many(self, amounts: dict[str, Fraction], program_hash: str, label: str = "",
                    delta: Fraction = Fraction(0), rho: Optional[Fraction] = None, loss: Any = None,
                    names: Optional[dict[str, str]] = None) -> list[int]: ...

    def finish_many(self, ids: list[int], status: str) -> None: ...


@dataclass(frozen=True)
class Cost:
    """What a run spends, as the ledger books it."""

    epsilon: Fraction          # the stated epsilon (at `delta` when the run is not pure)
    delta: Fraction            # the stated delta; 0 for a pure epsilon
    rho: Optional[Fraction]    # its zCDP rho when it makes Gaussian releases, else None
    loss: Any                  # its fuzzpy.accounting.ProvenLoss (what the cap check composes)


def run_cost(report: Any) -> Cost:
    """The cost of a checked program whose guarantee fits its budgets."""
    g = report.guarantee
    # A partition selection's delta has no zCDP rho (rule Partition selection): booked without one.
    rho = None if report.is_pure or report.approx_delta else report.rho
    return Cost(g.epsilon, g.stated_delta, rho, run_loss(report))


def run_loss(report: Any) -> Any:
    """The run's ProvenLoss for the ledger's cap check (None when a figure is unbounded: such a
    program is refused before it is charged)."""
    releases = sum((i.rho_releases for i in report.inputs), Fraction(0)) if report.inputs else Fraction(0)
    if INF in (report.epsilon, releases, report.approx_delta):
        return None
    return proven_loss(report)


def program_source(report: Any) -> str:
    """The program and every library it imports: a changed stdlib function is another program."""
    return report.sources.get(report.file, "") + "".join(
        f"\n# imported: {name}\n{text}" for name, text in sorted(report.sources.items()) if name != report.file)


# rule Notion: every run is booked with its whole loss
def charge(book: Book, accounts: Iterable[str], report: Any, params: Optional[dict[str, str]], label: str,
           names: Optional[dict[str, str]] = None, **book_options: Any) -> list[int]:
    """Book the run on every distinct account, all or none; the ids of the charges, in order.

    Every account is charged the program's total cost: one person may appear in several tables,
    so the loss of any one of them is at most the total (docs/ledger.md).  `names` names the
    accounts in refusals; `book_options` go to the book's `charge_many` (the local ledger's
    default cap and the files each dataset was seen as)."""
    from ..ledger.identity import program_hash  # the ledger package loads when a run is charged (a seeded run is not)

    cost = run_cost(report)
    amounts = {account: cost.epsilon for account in dict.fromkeys(accounts)}
    return book.charge_many(amounts, program_hash(program_source(report), params), label,
                            cost.delta, cost.rho, cost.loss, names, **book_options)

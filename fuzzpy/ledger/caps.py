"""Caps and what counts against them, whatever stores the charges (SQLite or PostgreSQL).

A cap is in one privacy notion (docs/ledger.md, "Caps by notion"): pure epsilon, epsilon at a
delta, or zCDP rho.  An account's history is composed by the accountant (`fuzzpy.accounting`)
and converted into the cap's notion; a run may be booked only if

1. its notion fits the cap's (rule Notion, docs/soundness.md): a pure epsilon cap admits only
   runs without Gaussian releases, a cap at delta D only runs stated at a delta of at most D,
   a rho cap only runs with a zCDP bound (E0606); and
2. the history with the run, composed, stays within the cap (E0601).

Both stores call `check_charge` inside the transaction that books the run, so this is the one
place where a cap is compared with a history.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ..diagnostics import FuzzError, error
from .amounts import check_amount, format_exact

NOTIONS = ("epsilon", "rho")  # a cap row's notion; an epsilon cap's delta says pure or at a delta


@dataclass(frozen=True)
class Usage:
    """What an account has spent, in the notion of its cap.

    `spent` is what counts against the cap: the certified epsilon at the cap's delta for an
    epsilon cap, the zCDP rho for a rho cap; without a cap, the sum of the recorded epsilons.
    Exact (Fraction) or certified upper bounds; math.inf when the history has no bound in that
    notion (a Gaussian run under a pure cap)."""

    cap: Any                    # EpsilonCap, RhoCap or None
    spent: Fraction | float
    remaining: Fraction | None  # max(cap - spent, 0); None without a cap
    epsilon_sum: Fraction       # the sum of the recorded epsilons (basic composition)
    delta_sum: Fraction         # the sum of the recorded deltas that goes with it
    rho: Fraction | float       # the history's zCDP rho; math.inf if a run has none
    default: bool = False       # the cap is the default one a local run set (`default_cap`), not one set on purpose


class History:
    """An account's charges, split into what the accountant composes (`total`: the sequential
    composition of the runs with a recorded ProvenLoss and of the pure runs without one, kept as
    it grows, so one more run costs one composition step, not one per earlier run) and the runs
    booked only as (epsilon, delta) with delta > 0 (`booked`, from schema-2 ledgers or callers
    that pass no loss), which count exactly as they were booked, by basic composition.
    `last_id` is the id of the last charge read into it (the ledgers read only newer ones)."""

    def __init__(self) -> None:
        from ..accounting import ProvenLoss

        self.total = ProvenLoss()
        self.booked: list[tuple[Fraction, Fraction, Fraction | None]] = []
        self.epsilon_sum = Fraction(0)
        self.delta_sum = Fraction(0)
        self.max_delta = Fraction(0)  # the largest delta a run was stated at (0: every run pure)
        self.last_id = 0

    def add(self, epsilon: Fraction, delta: Fraction, rho: Fraction | None, loss: Any) -> None:
        self.epsilon_sum += epsilon
        self.delta_sum += delta
        self.max_delta = max(self.max_delta, Fraction(delta))
        if loss is not None:
            self.total = self.total.add(_as_charged(loss))
        elif delta == 0:
            self.total = self.total.add(_pure_loss(epsilon))
        else:
            self.booked.append((epsilon, delta, rho))

    def copy(self) -> "History":
        out = History()
        out.total, out.booked, out.last_id = self.total, list(self.booked), self.last_id
        out.epsilon_sum, out.delta_sum, out.max_delta = self.epsilon_sum, self.delta_sum, self.max_delta
        return out

    def plus(self, epsilon: Fraction, delta: Fraction, rho: Fraction | None, loss: Any) -> "History":
        """This history with one more run (the history itself is unchanged)."""
        out = self.copy()
        out.add(epsilon, delta, rho, loss)
        return out


# ---- the cap check ------------------------------------------------------------------------------

class CapRefusal(FuzzError):
    """A run refused by an account's cap (E0601) or its notion (E0606); `account` says whose."""

    def __init__(self, account: str, refusal: FuzzError, amounts: Optional[tuple[str, str, str, str]] = None) -> None:
        super().__init__(refusal.diagnostics)
        self.account = account
        self.code = refusal.diagnostics[0].code
        self.amounts = amounts  # over a finite cap: (unit, needed, left, cap), exact, for a caller's own words


# rule Notion
def check_charge(account: str, name: str, cap: Any, history: History, epsilon: Fraction, delta: Fraction,
                 rho: Fraction | None, loss: Any) -> None:
    """Raise a CapRefusal, E0606 (notion) or E0601 (over the cap), unless one more run may be
    booked on `account`, with this cap and history.  `name` names the account in messages
    ("dataset adult"); messages carry public amounts only (caps, costs, totals spent)."""
    if cap is None:
        return
    problem = notion_problem(cap, delta, rho, loss)
    if problem is not None:
        raise CapRefusal(account, error("E0606", f"this run cannot be charged against the {describe_cap(cap)} cap "
                                                 f"of {name}: {problem}; nothing was charged", None, _CAP_HINT))
    after = usage(cap, history.plus(epsilon, delta, rho, loss))
    if not after.spent <= cap_amount(cap):  # Fractions, or math.inf: exact
        before = usage(cap, history)
        amounts = None if after.spent == math.inf else (
            "rho" if is_rho_cap(cap) else "epsilon", format_exact(after.spent - before.spent),
            format_exact(max(cap_amount(cap) - before.spent, Fraction(0))), format_exact(cap_amount(cap)))
        raise CapRefusal(account, over_cap(name, cap, before, after), amounts)


def notion_problem(cap: Any, delta: Fraction, rho: Fraction | None, loss: Any) -> str | None:
    """Why a run's notion does not fit the cap's (rule Notion), or None when it fits."""
    gaussian = (loss is not None and not loss.is_pure()) or (loss is None and rho is not None)
    selects = loss is not None and getattr(loss, "delta", 0) > 0  # rule Partition selection
    if is_rho_cap(cap):
        if loss is None and rho is None and delta > 0:
            return "it is booked in (epsilon, delta) without a zCDP rho"
        if selects:
            return ("it selects keys (partition selection), whose delta no zCDP rho covers; a cap in epsilon at a "
                    "delta admits it")
        return None
    if not cap.delta:
        if selects:
            return ("it selects keys (partition selection), which costs a delta, and a pure epsilon cap admits only "
                    "pure epsilon runs (a cap at a delta, --delta, admits it)")
        if gaussian:
            return ("it makes Gaussian releases, and a pure epsilon cap admits only pure epsilon runs "
                    "(a cap at a delta, --delta, or in rho, --rho, admits them)")
        if loss is None and delta > 0:
            return "it is booked in (epsilon, delta), and a pure epsilon cap admits only pure epsilon runs"
        return None
    if delta > cap.delta:
        return (f"it is stated at delta {format_exact(delta)}, more than the cap's delta "
                f"{format_exact(cap.delta)} (a run may state a smaller delta, never a larger one)")
    return None


_CAP_HINT = ("the cap is set with `fuzzpy ledger set-cap` (--cap E [--delta D] or --rho R); "
             "`fuzzpy ledger show` lists what was spent")


def over_cap(name: str, cap: Any, before: Usage, after: Usage) -> FuzzError:
    """E0601, naming the cap and its notion (never any private number: only public amounts)."""
    limit = cap_amount(cap)
    if after.spent == math.inf:
        return error("E0601", f"this run cannot be charged against the {describe_cap(cap)} cap of {name}: "
                              f"{_unbounded_why(cap, before)}", None, _CAP_HINT)
    left = max(limit - before.spent, Fraction(0))
    unit = "rho" if is_rho_cap(cap) else "epsilon"
    text = (f"this run needs {unit} {format_exact(after.spent - before.spent)} but only "
            f"{format_exact(left)} of the cap {format_exact(limit)} remains for {name} "
            f"(a cap in {describe_cap(cap)}")
    if not is_rho_cap(cap) and cap.delta:
        text += f": the runs so far and this one, composed, spend epsilon {format_exact(after.spent)}"
    return error("E0601", text + ")", None, _CAP_HINT)


def _unbounded_why(cap: Any, before: Usage) -> str:
    if is_rho_cap(cap):
        return ("an earlier run was booked in (epsilon, delta) without a zCDP rho, so the history "
                "has no rho bound")
    if not cap.delta:
        return ("an earlier run made Gaussian releases or was booked with a delta > 0, and a pure "
                "epsilon cap admits only pure epsilon runs; set a cap at a delta (--delta) or in rho (--rho)")
    return (f"the deltas booked by earlier runs (in total {format_exact(before.delta_sum)}) leave "
            "no delta of the cap for this run")


# ---- spending in the cap's notion ---------------------------------------------------------------

def usage(cap: Any, history: History) -> Usage:
    """Spending in every notion; against the cap, what `fuzzpy.accounting.spent` says of the
    composed losses, plus the booked runs by basic composition (docs/ledger.md)."""
    from ..accounting import rho_of

    total = history.total
    booked_rho = [r for _, _, r in history.booked]
    rho: Fraction | float = math.inf if None in booked_rho else \
        rho_of(total) + sum(booked_rho, Fraction(0))  # type: ignore[arg-type]
    if cap is None:
        return Usage(None, history.epsilon_sum, None, history.epsilon_sum, history.delta_sum, rho)
    spent = rho if is_rho_cap(cap) else _epsilon_spent(history, cap)
    remaining = Fraction(0) if spent == math.inf else max(cap_amount(cap) - spent, Fraction(0))
    return Usage(cap, spent, remaining, history.epsilon_sum, history.delta_sum, rho)


def _epsilon_spent(history: History, cap: Any) -> Fraction | float:
    """The epsilon at the cap's delta of the whole history.  Booked runs (eps_i, delta_i) take
    sum eps_i and sum delta_i; the composed losses are converted once at the delta left over
    (basic composition of the two parts: valid however the runs were interleaved)."""
    from ..accounting import EpsilonCap, spent

    booked_eps = sum((e for e, _, _ in history.booked), Fraction(0))
    rest = cap.delta - sum((d for _, d, _ in history.booked), Fraction(0))
    if rest < 0:
        return math.inf
    total = history.total
    if total.epsilon == 0 and total.gauss_rho == 0:
        converted: Fraction | float = Fraction(0)  # nothing released (the GDP search needs mu > 0)
    else:
        converted = spent([total], EpsilonCap(cap.epsilon, rest))
    return math.inf if converted == math.inf else booked_eps + converted


def _as_charged(loss: Any) -> Any:
    """A run's loss as the cap check composes it.  A pure run (no Gaussian release) is, as a
    whole, an epsilon-DP mechanism, hence dominated by randomized response at that epsilon:
    recording it as one such release lets the accountant compose pure runs optimally (KOV)
    under a cap at a delta.  Other losses are used as recorded."""
    from ..accounting import ProvenLoss

    if loss.is_pure() and loss.pure is None and loss.epsilon not in (0, math.inf):
        return ProvenLoss(loss.epsilon, loss.pure_rho, loss.gauss_rho, loss.laplace,
                          ((loss.epsilon, 1),), loss.gauss_grid_sigma)
    return loss


def _pure_loss(epsilon: Fraction) -> Any:
    """A run booked as a pure epsilon without a recorded loss: epsilon-DP, so epsilon^2/2-zCDP
    (Bun and Steinke 2016, Proposition 3.3) and dominated by randomized response at epsilon."""
    from ..accounting import ProvenLoss

    if epsilon == 0:
        return ProvenLoss()
    return ProvenLoss(epsilon, epsilon * epsilon / 2, Fraction(0), None, ((epsilon, 1),))


# ---- the default cap ----------------------------------------------------------------------------

DEFAULT_CAP = Fraction(10)  # epsilon: far above one analysis, about where published deployments stop
DEFAULT_RHO_CAP = Fraction(1)  # zCDP rho, for Gaussian runs stated at no delta: about epsilon 8.4 at delta 1e-6


def default_cap(history: History, delta: Fraction, rho: Fraction | None = None, loss: Any = None) -> Any:
    """The cap a local run sets on a dataset that has none (docs/ledger.md, "The default cap"),
    in the notion of the history with this run, which stays the dataset's unit: pure epsilon
    DEFAULT_CAP when every run is pure; epsilon DEFAULT_CAP at the largest delta a run was
    stated at, if any was; else (Gaussian runs budgeted in zCDP, at no delta) rho
    DEFAULT_RHO_CAP.  Whoever wants another amount or notion sets one on purpose (`fuzzpy
    ledger set-cap`)."""
    from ..accounting import EpsilonCap, RhoCap

    largest = max(history.max_delta, Fraction(delta))
    gaussian = (loss is not None and not loss.is_pure()) or (loss is None and rho is not None) or \
        history.total.gauss_rho > 0
    if gaussian and not largest:
        return RhoCap(DEFAULT_RHO_CAP)
    return EpsilonCap(DEFAULT_CAP, largest)


DEFAULT_CAP_NOTE = ("this is the dataset's default cap, set by its first run (docs/ledger.md, \"The default cap\"): "
                    "to spend more, or in another notion, set its cap on purpose with `fuzzpy ledger set-cap`")


# ---- caps and charges as stored ---------------------------------------------------------------

def describe_cap(cap: Any) -> str:
    """"pure epsilon", "epsilon at delta 0.000001" or "zCDP rho": a cap's notion, in words."""
    if is_rho_cap(cap):
        return "zCDP rho"
    return f"epsilon at delta {format_exact(cap.delta)}" if cap.delta else "pure epsilon"


def is_rho_cap(cap: Any) -> bool:
    return hasattr(cap, "rho")


def cap_amount(cap: Any) -> Fraction:
    return cap.rho if is_rho_cap(cap) else cap.epsilon


def cap_row(cap: Any) -> tuple[str, str, str | None]:
    """(amount, notion, delta) as stored: a plain number is a pure epsilon cap."""
    from ..accounting import EpsilonCap, RhoCap

    if isinstance(cap, RhoCap):
        return str(check_amount(cap.rho, "rho cap")), "rho", None
    if isinstance(cap, EpsilonCap):
        amount, delta = check_amount(cap.epsilon, "cap"), check_amount(cap.delta, "cap delta")
        if delta >= 1:
            raise error("E0605", f"invalid cap delta {format_exact(delta)}: expected a number in [0, 1)")
        return str(amount), "epsilon", (str(delta) if delta else None)
    return str(check_amount(cap, "cap")), "epsilon", None


def parse_cap(cap: str | None, delta: str | None, rho: str | None, code: str = "E0605") -> Any:
    """--cap E [--delta D] or --rho R: exactly one notion (an EpsilonCap or a RhoCap); `code`
    is the error code of a bad combination or amount."""
    from ..accounting import EpsilonCap, RhoCap
    from .amounts import parse_amount

    try:
        if (cap is None) == (rho is None):
            raise error(code, "give the cap in one notion: --cap EPSILON (with --delta D for an "
                              "(epsilon, delta) cap) or --rho RHO")
        if rho is not None:
            if delta is not None:
                raise error(code, "--delta goes with an epsilon cap (--cap), not with --rho")
            return RhoCap(parse_amount(rho, "rho cap"))
        d = parse_amount(delta, "cap delta") if delta is not None else Fraction(0)
        if d >= 1:
            raise error(code, f"invalid cap delta {delta[:60]!r}: expected a number in [0, 1)")
        return EpsilonCap(parse_amount(cap, "cap"), d)
    except FuzzError as exc:
        for d in exc.diagnostics:
            d.code = code
        raise


def same_notion(template: Any, amount: Fraction) -> Any:
    """A cap of `amount` in the notion of `template` (a pure epsilon cap when there is none)."""
    from ..accounting import EpsilonCap, RhoCap

    if template is not None and is_rho_cap(template):
        return RhoCap(amount)
    return EpsilonCap(amount, Fraction(0) if template is None else template.delta)


def cap_from_row(amount: Fraction, notion: str, delta: Fraction | None) -> Any:
    """The cap a stored row describes, or None when the row is not one fuzzpy writes."""
    from ..accounting import EpsilonCap, RhoCap

    if notion == "rho" and delta is None:
        return RhoCap(amount)
    if notion == "epsilon" and (delta is None or delta < 1):
        return EpsilonCap(amount, delta or Fraction(0))
    return None


def charge_notion(delta: Fraction, rho: Fraction | None) -> tuple[str | None, str | None]:
    """The stored delta and rho of a charge: NULL for a pure epsilon's delta 0."""
    delta = Fraction(delta)
    if not 0 <= delta < 1:
        raise error("E0605", f"invalid delta {delta}: expected a number in [0, 1)")
    if rho is not None:
        rho = check_amount(rho, "rho")
    return (str(delta) if delta else None, str(rho) if rho is not None else None)


def check_account(account: str) -> None:
    if not isinstance(account, str) or not account.strip():
        raise error("E0605", "invalid dataset identity: it must be a non-empty string")


def loss_json(loss: Any) -> str | None:
    """The exact JSON of a run's ProvenLoss, as stored in the `loss` column."""
    if loss is None:
        return None
    from ..accounting import ProvenLoss

    if not isinstance(loss, ProvenLoss):
        raise error("E0605", f"invalid privacy loss: expected a fuzzpy.accounting.ProvenLoss, "
                             f"not {type(loss).__name__}")
    return json.dumps(loss.to_dict(), sort_keys=True, separators=(",", ":"))


def loss_from_json(text: str) -> Any:
    """The ProvenLoss of a stored `loss` column; ValueError (and the like) when unreadable."""
    from ..accounting import ProvenLoss

    return ProvenLoss.from_dict(json.loads(str(text)))

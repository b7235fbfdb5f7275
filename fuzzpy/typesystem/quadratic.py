"""Quadratic costs: zCDP rho carried next to the linear distances (docs/soundness.md, rule Rho).

Pure-epsilon releases cost a *linear* amount of distance (eps * d), which the distance
expressions of sens.py carry.  A Gaussian release does not: its zCDP cost is
rho = (Delta * d)^2 / (2 sigma^2), *quadratic* in how far its input moves (group privacy in zCDP
is k^2 rho).  So a distance expression also holds *shadow* entries: for a symbol s and a channel
ch, the entry `shadow(s, ch)` with coefficient r means "rho <= r * d_s^2".  The invariant kept by
every rule (I5 in docs/soundness.md) is

    rho_ch(value) <= sum over shadow entries (s, ch) of  r * d_s^2     for every move d >= 0.

Three channels:
  - "gs": the Gaussian releases made on Poisson samples, like "g" (rule Poisson subsampling);
  - "g": the other Gaussian releases, sum of mu_i^2 / 2 with mu_i = Delta_i / sigma_i (a Gaussian bound, so
    the exact Gaussian conversion to (epsilon, delta) applies to this part alone);
  - "z": the pure-epsilon releases seen as zCDP (eps-DP implies eps^2/2-zCDP), so that a
    program mixing both has a total rho.

Shadow entries add under sequential composition and take the maximum at branches like linear
entries; they differ only where a symbol is *replaced* by a distance expression (a call maps a
parameter onto its argument; a split part is replaced by its parent), which `lift` does:
if d_s <= sum_u a_u d_u then, by Cauchy-Schwarz with weights a_u,
    d_s^2 <= (sum_u a_u) * sum_u a_u d_u^2,
so r * d_s^2 <= sum_u (r * A * a_u) d_u^2 with A = sum_u a_u.  For a single symbol this is the
exact group-privacy factor a^2.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Optional

from .sens import INF, ONE, ZERO, Coef, Dist, c_add, c_mul, is_const, is_inf

# "gs": the Gaussian releases made on Poisson samples (rule Poisson subsampling), kept apart from
# "g" so that the accountant knows the rho of the other Gaussian releases.
SAMPLED_GAUSS = "gs"
GAUSS_CHANNELS = ("g", SAMPLED_GAUSS)
CHANNELS = ("g", "z", SAMPLED_GAUSS)
# The inventory of scalar Laplace releases (rule Inventory): channel "L:<eps>" counts releases of
# that epsilon whose input moves by at most its calibrated sensitivity when the symbol moves by
# at most 1; "L?" marks a symbol on which a pure release is not counted (the inventory is then
# unknown).  They are not quadratic: they follow their own substitution rule (`lift`).
# Channel "LP:<eps>" counts any other pure release that is eps-DP when the symbol moves by at most 1
# (noisy max, exponential, sparse vector, vector Laplace, randomized response): the accountant
# composes those by randomized-response domination, the scalar Laplace ones by their own PLD.
UNKNOWN = "L?"
PURE_PREFIX = "LP:"


def laplace_channel(eps: Fraction) -> str:
    return f"L:{eps}"


def pure_channel(eps: Fraction) -> str:
    return f"{PURE_PREFIX}{eps}"


def is_inventory(ch: str) -> bool:
    return ch.startswith("L")


# The delta of approximate releases (partition selection, rule Partition selection): channel "D"
# holds the total probability of their bad events when the symbol moves by at most 1.  Like the
# inventory it is a count, not a quadratic cost; it follows its own substitution rule (`lift`).
DELTA = "D"


def is_count(ch: str) -> bool:
    """Channels that count releases (the inventory, the delta) rather than bound a quadratic cost."""
    return is_inventory(ch) or ch == DELTA
_SEP = "\x00"  # never part of a symbol name


def shadow(sym: str, ch: str) -> str:
    return f"{sym}{_SEP}{ch}"


def is_shadow(key: str) -> bool:
    return _SEP in key


def base_of(key: str) -> str:
    return key.split(_SEP, 1)[0]


def channel_of(key: str) -> str:
    return key.split(_SEP, 1)[1]


def linear_part(d: Dist) -> Dist:
    """The distance entries (what bounds how far the value moves)."""
    return {s: c for s, c in d.items() if _SEP not in s}  # not is_shadow(s), inline: asked of every distance


def quadratic_part(d: Dist) -> Dist:
    return {s: c for s, c in d.items() if _SEP in s}


# rule Rho: a symbol's shadow coefficients, taken out to be lifted
def pop_quad(d: Dist, sym: str) -> dict[str, Coef]:
    """Remove and return the shadow coefficients of `sym` (channel -> coefficient)."""
    out = {}
    if _SEP in sym:  # not a symbol: no key has it as its base
        return out
    if _SEP not in "".join(d):  # no shadow entry at all (most distances): one scan in C
        return out
    prefix = sym + _SEP  # is_shadow(k) and base_of(k) == sym, in one test
    for key in [k for k in d if k.startswith(prefix)]:
        c = d.pop(key)
        if c != 0:
            out[channel_of(key)] = c
    return out


# rule Rho: r s^2 re-expressed when s is replaced by a distance expression
def lift(quad: dict[str, Coef], arg: Dist) -> Dist:
    """The shadow entries of a symbol whose coefficients are `quad`, re-expressed when the symbol
    is replaced by the distance expression `arg` (Cauchy-Schwarz; module docstring).  Only arg's
    linear entries bound how far it moves; its own shadow entries are the cost of distributions
    inside it, which the linear substitution of the caller carries."""
    if not quad:
        return {}
    moves = linear_part(arg)
    if not moves:
        return {}
    # Infinite entries stay out of the total: if such a u moves at all, the bound is infinite
    # anyway (its own entry below); if it does not (a public value captured by a row function,
    # 0 * inf = 0), Cauchy-Schwarz over the finite entries alone bounds the move.
    total: Coef = ZERO
    for c in moves.values():
        if not is_inf(c):
            total = c_add(total, c)
    out: Dist = {}
    for ch, r in quad.items():
        if r == 0:
            continue
        if is_inventory(ch):
            out = _add(out, _move_inventory(ch, r, moves))
            continue
        if ch == DELTA:
            out = _add(out, _move_delta(r, moves))
            continue
        factor = c_mul(r, total)  # raises NonLinear for two unknowns (the caller reports E0304)
        for u, a in moves.items():
            c = INF if is_inf(factor) or is_inf(a) else c_mul(factor, a)
            if c != 0:
                key = shadow(u, ch)
                out[key] = c_add(out[key], c) if key in out else c
    return out


def _add(a: Dist, b: Dist) -> Dist:
    for k, c in b.items():
        a[k] = c_add(a[k], c) if k in a else c
    return a


def _move_inventory(ch: str, count: Coef, moves: Dist) -> Dist:
    """Rule Inventory: releases counted on a symbol that is replaced by `moves`.  When it is one
    symbol u moving by a <= 1 per unit of u, each release's input still moves by at most its
    sensitivity when u moves by 1: the count moves to u.  Otherwise (a > 1: group privacy; several
    symbols, which may move together; an unknown coefficient) the releases are no longer counted:
    u is marked unknown."""
    if ch != UNKNOWN and len(moves) == 1:
        (u, a), = moves.items()
        if is_const(a) and not is_inf(a) and a <= 1:
            return {shadow(u, ch): count}
    # The mark's coefficient is only a presence; it is the count itself, so that an unknown count
    # of a recursion (0 once solved, say) marks nothing when it is 0.
    return {shadow(u, UNKNOWN): count for u in moves}


# rule Partition selection: the delta moves to one symbol that moves the input by at most 1
def _move_delta(delta: Coef, moves: Dist) -> Dist:
    """The delta of approximate releases on a symbol replaced by `moves`: when it is one symbol u
    moving by a <= 1 per unit of u, a unit move of u moves their inputs by at most one unit, and
    the delta stays as it is, on u.  Otherwise the inputs may move by more than one unit, where
    the delta of partition selection grows faster than linearly (group privacy): infinite, so
    the program is refused (E0332) rather than charged a wrong delta."""
    if len(moves) == 1:
        (u, a), = moves.items()
        if is_const(a) and not is_inf(a) and a <= 1:
            return {shadow(u, DELTA): delta}
    return {shadow(u, DELTA): INF for u in moves}


# rule Partition selection: the delta of one release, on its one symbol
def delta_of_release(delta: Fraction, moves: Dist) -> Dist:
    """The delta entry of one partition selection calibrated to its input's sensitivity: on its
    only symbol when its input has one, with a finite coefficient (at most the calibration, so a
    unit move of the symbol keeps the bad events' probability within delta); with several
    symbols, which may move together beyond the calibration, infinite (E0332)."""
    if not moves:
        return {}
    if len(moves) == 1:
        (u, a), = moves.items()
        if is_const(a) and not is_inf(a):
            return {shadow(u, DELTA): delta}
    return {shadow(u, DELTA): INF for u in moves}


# rule Inventory: one count for a pure release on one symbol, else marks
def inventory_of_release(eps: Optional[Fraction], moves: Dist, cost: Optional[Dist] = None) -> Dist:
    """The inventory entries of one pure release whose input moves by `moves` (its linear
    distance) and whose linear cost is `cost`: one count of `eps` on its only symbol when it is a
    scalar Laplace release (`eps` given) on one symbol with a finite coefficient (which is at most
    its sensitivity S, the largest coefficient); otherwise, when its cost is c per unit of one
    symbol (c finite), it is c-DP when that symbol moves by 1: one count of c in the pure channel;
    otherwise every symbol it depends on is marked unknown."""
    if eps is not None and len(moves) == 1:
        (u, a), = moves.items()
        if is_const(a) and not is_inf(a):  # (is_inf: no Fraction-float comparison)
            return {shadow(u, laplace_channel(eps)): ONE}
    if eps is None and cost is not None and len(cost) == 1:
        (u, c), = cost.items()
        if is_const(c) and not is_inf(c) and c > 0:
            return {shadow(u, pure_channel(Fraction(c))): ONE}
    return {shadow(u, UNKNOWN): ONE for u in moves}


# rule Rho: a value's entries in one channel, left out where a bound of the whole replaces them
def without_channel(d: Dist, ch: str) -> Dist:
    """d without its shadow entries of channel `ch` (its other entries as they are)."""
    return {k: c for k, c in d.items() if not (is_shadow(k) and channel_of(k) == ch)}


# rule Rho: a pure release's channel-z cost
def zcdp_of_pure(cost: Dist) -> Dist:
    """The "z" channel of a pure release whose linear cost is `cost` (eps_s per unit of d_s):
    (sum_s eps_s d_s)^2 / 2 <= (E/2) sum_s eps_s d_s^2 with E = sum_s eps_s (Cauchy-Schwarz)."""
    return lift(_Z_HALF, cost)


_Z_HALF = {"z": Fraction(1, 2)}  # read only (lift does not change its quad)

__all__ = ["CHANNELS", "GAUSS_CHANNELS", "SAMPLED_GAUSS", "DELTA", "delta_of_release", "is_count",
           "shadow", "is_shadow", "base_of", "channel_of", "linear_part", "quadratic_part",
           "pop_quad", "lift", "zcdp_of_pure", "without_channel", "UNKNOWN", "laplace_channel", "is_inventory",
           "inventory_of_release", "pure_channel", "PURE_PREFIX"]


# rule Poisson subsampling: releases on Poisson samples are counted apart from the inventory
SUBSAMPLED_PREFIX = "LS:"


# rule Poisson subsampling: the count channel of one amplified pair
def subsampled_channel(kind: str, q: Fraction, value: Fraction) -> str:
    """The count channel of releases of one amplified pair: kind ("laplace" or "pure"), the
    sample's rate q and the inner release's epsilon.  It starts with "L": an inventory channel,
    which moves, or becomes the unknown mark, by the inventory's substitution rule (`lift`)."""
    return f"{SUBSAMPLED_PREFIX}{kind}:{q}:{value}"


def parse_subsampled(ch: str) -> tuple[str, Fraction, Fraction]:
    kind, q, value = ch[len(SUBSAMPLED_PREFIX):].split(":")
    return kind, Fraction(q), Fraction(value)


__all__ += ["SUBSAMPLED_PREFIX", "subsampled_channel", "parse_subsampled"]

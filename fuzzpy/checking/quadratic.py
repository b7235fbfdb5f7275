"""Quadratic costs: zCDP rho carried next to the linear distances (docs/soundness.md, rule Rho).

Pure-epsilon releases cost a *linear* amount of distance (eps * d), which the distance
expressions of sens.py carry.  A Gaussian release does not: its zCDP cost is
rho = (Delta * d)^2 / (2 sigma^2), *quadratic* in how far its input moves (group privacy in zCDP
is k^2 rho).  So a distance expression also holds *shadow* entries: for a symbol s and a channel
ch, the entry `shadow(s, ch)` with coefficient r means "rho <= r * d_s^2".  The invariant kept by
every rule (I5 in docs/soundness.md) is

    rho_ch(value) <= sum over shadow entries (s, ch) of  r * d_s^2     for every move d >= 0.

Two channels:
  - "g": Gaussian releases, sum of mu_i^2 / 2 with mu_i = Delta_i / sigma_i (a Gaussian bound, so
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

from .sens import INF, ZERO, Coef, Dist, c_add, c_mul

CHANNELS = ("g", "z")
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
    return {s: c for s, c in d.items() if not is_shadow(s)}


def quadratic_part(d: Dist) -> Dist:
    return {s: c for s, c in d.items() if is_shadow(s)}


def pop_quad(d: Dist, sym: str) -> dict[str, Coef]:
    """Remove and return the shadow coefficients of `sym` (channel -> coefficient)."""
    out = {}
    for ch in CHANNELS:
        c = d.pop(shadow(sym, ch), ZERO)
        if c != 0:
            out[ch] = c
    return out


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
        if c != INF:
            total = c_add(total, c)
    out: Dist = {}
    for ch, r in quad.items():
        if r == 0:
            continue
        factor = c_mul(r, total)  # raises NonLinear for two unknowns (the caller reports E0304)
        for u, a in moves.items():
            c = INF if factor == INF or a == INF else c_mul(factor, a)
            if c != 0:
                key = shadow(u, ch)
                out[key] = c_add(out[key], c) if key in out else c
    return out


def zcdp_of_pure(cost: Dist) -> Dist:
    """The "z" channel of a pure release whose linear cost is `cost` (eps_s per unit of d_s):
    (sum_s eps_s d_s)^2 / 2 <= (E/2) sum_s eps_s d_s^2 with E = sum_s eps_s (Cauchy-Schwarz)."""
    return lift({"z": Fraction(1, 2)}, cost)

__all__ = ["CHANNELS", "shadow", "is_shadow", "base_of", "channel_of", "linear_part", "quadratic_part",
           "pop_quad", "lift", "zcdp_of_pure"]

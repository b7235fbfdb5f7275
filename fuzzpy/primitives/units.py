"""Privacy units: bounding what one individual contributes, and group keys released privately.

A table whose schema declares a unit (`schema Flight unit tailnum { ... }`) has type
`bag Flight (unit tailnum)` (types.UnitBag): its distance counts units, so neighbouring tables
differ by all the rows of one unit, however many.  Only the primitives declared `units=True`
accept it: `filter`, `map` and `union` keep each row with its unit (primitives/bags.py), as does
`join_public` of it with a public table (primitives/joins.py), and the primitives here bound what
a unit contributes or release keys.  Every other primitive refuses it
(E0330, `refuse_units`), with the way to bound it.

* `bound_rows k t`: at most k rows per unit, a table without a unit at distance k per unit;
* `bound_groups m c key t`: at most m groups per unit and c rows per unit and group, one part per
  declared key; the parts move by at most m*c in all and c each (rule Bounded groups), so a
  histogram costs m*c in L1 (Laplace) and sqrt(m)*c in L2 (Gaussian);
* `bound_groups_in keys m c key t` and `groupby_in keys key b`: the same over a public list of
  keys (released by `select_keys`): rows with other keys are dropped;
* `select_keys eps delta m key t`: the keys that enough units have, released with thresholded
  discrete Laplace noise (rule Partition selection): eps-DP except for an event of probability
  at most delta.

Which rows are kept is a uniformly random choice per unit, from the run's secure random source:
it depends only on that unit's rows and fresh randomness (docs/soundness.md says why that
suffices).  The evaluators are in fuzzpy/runtime/kernels/units.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..typesystem.ir import EXPLAINED
from ..typesystem.quadratic import delta_of_release, linear_part
from ..typesystem.sens import d_add, d_scale
from ..typesystem.types import STRING, Bag, Bool, Cat, Fuzzy, ListT, Num, Parts, Str, Type, Unit, UnitBag, holds_units
from .bags import row_function
from .declarations import Arg, Result, primitive
from .mechanisms import charge, public_epsilon, public_list, pure_release
from .partitions import _key_domain

_REF_UNITS = ("Tumult Analytics (MaxRowsPerID, MaxGroupsPerID); Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, "
              "Gipson 2020, Differentially private SQL with bounded user contribution (PoPETs 2020(2))")
_REF_SELECTION = ("Desfontaines, Voss, Gipson, Mandayam 2022, Differentially private partition selection (PoPETs "
                  "2022(1)), section 3 (Laplace thresholding); Korolova, Kenthapadi, Mishra, Ntoulas 2009")

_REF_OPTIMAL = ("Desfontaines, Voss, Gipson, Mandayam 2022, Differentially private partition selection (PoPETs "
                "2022(1)), section 4 (the optimal mechanism) and its extension to users in several partitions")
# the partition selections: mechanisms that cost a delta (rule Partition selection)
SELECTIONS = ("select_keys", "select_keys_optimal")

MAX_BOUND = 10**9  # the largest k, m or c: far above any table, and small enough for every kernel


# ---- what a table with a unit is, and what may take it ----------------------------------------

def first_unit(t: Type) -> str:
    """The unit of the first table with a unit inside t."""
    if isinstance(t, UnitBag):
        return t.unit
    for part in vars(t).values():
        for item in part if isinstance(part, tuple) else (part,):
            inner = item[1] if isinstance(item, tuple) and len(item) == 2 else item
            if isinstance(inner, Type) and holds_units(inner):
                return first_unit(inner)
    return "?"


# rule Units: a primitive that does not know units refuses them, with the way to bound them
def refuse_units(ctx, name: str, args: list[Arg]) -> None:
    """E0330 when a primitive that reads rows is given a table with a privacy unit (or a value
    holding one): one unit may have any number of rows, so no bound holds."""
    for a in args:
        if a.fn is None and type(a.type) not in SCALAR_TYPES and _holds_units(a.type):
            unit = first_unit(a.type)
            raise ctx.fail("E0330", f"{name} cannot take a table whose privacy unit is {unit}: one {unit} may have "
                           "any number of rows, so nothing it computes from them has a bound", a.span,
                           f"bound what each {unit} contributes first: bound_rows k t keeps at most k rows of each "
                           f"{unit} (a table without a unit, at distance k), bound_groups m c key t at most m groups "
                           f"and c rows per group of each {unit}",
                           "filter, map and union keep the unit; select_keys releases the keys many units have",
                           *_join_notes(name, unit))


# The types whose values never hold a table (so no unit): a primitive call given only these
# (and functions) needs no `refuse_units`; the few structured types a program has are asked once.
SCALAR_TYPES = frozenset({Num, Bool, Str, Cat, Unit})


def _holds_units(t: Type) -> bool:
    """holds_units, whose answer each type keeps: a cache keyed by types would compare a type with
    an equal one of an earlier check field by field."""
    return holds_units(t)


# rule Units: which joins keep a unit, and why the others need bounded rows
_ROW_JOINS = ("join_private", "truncate")


def _join_notes(name: str, unit: str) -> tuple[str, ...]:
    if name not in _ROW_JOINS:
        return ()
    return (f"join_public keeps the {unit} of each row of its first table (a table with a unit joined with a "
            f"public one); {name} needs a table without a unit: bound_rows k t first, then truncate and join the "
            "bounded rows as any table without a unit",
            f"a join of two tables on their {unit} is not accepted: one {unit}'s result rows are all pairs of its "
            f"rows on both sides, so their number has no bound in the tables' sizes")


def unit_table(ctx, arg: Arg, what: str) -> UnitBag:
    if not isinstance(arg.type, UnitBag):
        notes = ["a table without a privacy unit counts rows: each row is an individual, whose contribution is "
                 "already one row"] if isinstance(arg.type, Bag) else []
        raise ctx.fail("E0202", f"{what} expects a table with a privacy unit (its schema declared with "
                       f"`unit column`), but this is {arg.type}", arg.span, *notes)
    return arg.type


def whole_bound(ctx, arg: Arg, what: str, prim: str) -> int:
    """A contribution bound: a public whole number from 1 to MAX_BOUND."""
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E0209", f"{what} of {prim} must be a public constant (a literal or a param)", arg.span)
    value = Fraction(arg.const)
    if value.denominator != 1 or not 1 <= value <= MAX_BOUND:
        raise ctx.fail("E0213", f"{what} of {prim} must be a whole number from 1 to {MAX_BOUND}, got {value}",
                       arg.span)
    return int(value)


def _released_keys(ctx, arg: Arg, prim: str) -> tuple[tuple[str, ...] | None, dict]:
    """The keys of a partition given as a public list of strings: the constant list itself
    (declared keys), or None for a list released by the run (rule Released keys)."""
    elem = public_list(ctx, arg, "keys", prim) if not (arg.is_const and len(arg.const) == 0) else STRING
    if not isinstance(elem, Str):
        raise ctx.fail("E0202", f"the keys of {prim} must be a list of strings, but this is {arg.type}", arg.span,
                       "select_keys releases such a list")
    if not arg.is_const:
        return None, {"released": True}
    keys = tuple(arg.const)
    if len(set(keys)) != len(keys):
        raise ctx.fail("E0307", f"the keys of {prim} list the same key twice", arg.span)
    return keys, {"keys": keys}


def _key_kind(ctx, t: Type, span, prim: str) -> str:
    """How a key is compared with the released strings: as a string, or an int as its digits."""
    if isinstance(t, (Str, Cat)):
        return "string"
    if isinstance(t, Num) and t.integer:
        return "int"
    raise ctx.fail("E0307", f"the key of {prim} must be a string, an int or a category, but it is {t}", span,
                   "keys are compared with the released keys, which are strings")


def _row_source(ctx, t: Arg, what: str) -> tuple[Type, str | None]:
    """The rows of a table with a unit, or of a table without one (each row its own unit)."""
    if isinstance(t.type, UnitBag):
        return t.type.elem, t.type.unit
    if isinstance(t.type, Bag):
        return t.type.elem, None
    raise ctx.fail("E0202", f"{what} expects a table, but this is {t.type}", t.span)


# ---- bounding contributions ---------------------------------------------------------------------

# rule Bound rows: at most k rows per unit, a row-level table at distance k per unit
@primitive("bound_rows", ("k", "t"), "(k : int) -> bag 'a (unit u) -o[k] bag 'a",
           "bound_rows k t: at most k rows of each unit of t (chosen uniformly at random per unit), as a "
           "table without a unit: a unit added or removed moves it by at most k rows.",
           "Condition on the random choice: the choice for a unit depends only on its own rows and fresh "
           "randomness, so tables that differ in one unit keep the same rows of every other unit and differ "
           "by at most k rows; the row-level bound then holds for every choice, and a mixture of pairs each "
           "within the bound is within it (joint convexity, for pure, Renyi/zCDP and hockey-stick "
           "divergences alike; docs/soundness.md, rule Bound rows). " + _REF_UNITS,
           category="units", units=True)
def _bound_rows(ctx, args, span):
    k_arg, t = args
    unit_t = unit_table(ctx, t, "bound_rows")
    k = whole_bound(ctx, k_arg, "k", "bound_rows")
    return Result(Bag(unit_t.elem), d_scale(Fraction(k), t.dist),
                  info={"k": k, "unit": unit_t.unit, EXPLAINED: _rows_explained(k, unit_t.unit)})


# rule Bound rows, rule Bounded groups: the cost of bounding in the user's terms (the editor's hover)
def _rows_explained(k: int, unit: str) -> str:
    return (f"at most {k} {_plural(k, 'row')} of each {unit}: a {unit} added or removed moves the result, a table "
            f"without a unit (each row its own), by at most {k} {_plural(k, 'row')}, so a count or sum of it costs "
            f"{k} times its epsilon")


def _groups_explained(m: int, c: int, unit: str) -> str:
    return (f"at most {m} {_plural(m, 'group')} of each {unit} and {c} {_plural(c, 'row')} in each: a {unit} added "
            f"or removed moves at most {m} {_plural(m, 'part')}, each by at most {c} {_plural(c, 'row')} "
            f"({m * c} in all), so a histogram of counts costs {m * c} times a part's epsilon with laplace and "
            f"{m * c * c} times its rho with gaussian")


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _bounded_groups(ctx, m_arg: Arg, c_arg: Arg, key: Arg, t: Arg, span, prim: str, keys, info: dict) -> Result:
    """Rule Bounded groups: parts with sum_k d_k <= m*c*d(t) and each d_k <= c*d(t)."""
    unit_t = unit_table(ctx, t, prim)
    m, c = whole_bound(ctx, m_arg, "m", prim), whole_bound(ctx, c_arg, "c", prim)
    inst, captured = row_function(ctx, key, unit_t.elem, span)
    if keys is None and "released" not in info:
        keys, key_info = _key_domain(ctx, inst.cod, key.span)
        info = {**key_info, **info}
    else:
        info = {**info, "key_kind": _key_kind(ctx, inst.cod, key.span, prim)}
    parent = d_add(d_scale(Fraction(m * c), t.dist), captured)
    released = keys is None
    labels = ["released"] if released else list(keys)
    parts = ctx.split(parent, labels, spread=m, uniform=released)
    info = {**info, "m": m, "c": c, "unit": unit_t.unit, EXPLAINED: _groups_explained(m, c, unit_t.unit)}
    return Result(Parts(() if released else tuple(keys), Bag(unit_t.elem), released), d_add(*parts),
                  ir_args=[m_arg.ir, c_arg.ir, inst.code, t.ir], parts=parts, info=info)


@primitive("bound_groups", ("m", "c", "key", "t"),
           "(m : int) -> (c : int) -> ('a -> cat K | int[lo, hi]) -> bag 'a (unit u) -o[m c] parts K (bag 'a)",
           "bound_groups m c key t: one part per declared value of key (as groupby), keeping for each unit "
           "of t at most m of its groups (chosen at random) and at most c of its rows in each (at random). "
           "The parts move by at most m*c rows in all and c each per unit: a histogram of them costs "
           "eps * m * c with laplace eps per part, and rho * m * c^2 with gaussian rho per part.",
           "Condition on the random choices (per unit, from its own rows and fresh randomness): a unit "
           "added or removed changes at most m parts, each by at most c rows, so sum_k d_k <= m c and "
           "d_k <= c. Hence a linear cost sum_k a_k d_k is at most c times the m largest a_k (the exact "
           "optimum of that linear program) and a quadratic one sum_k r d_k^2 <= r (c)(m c) = r m c^2: "
           "L1 sensitivity m c, L2 sensitivity sqrt(m) c (docs/soundness.md, rule Bounded groups). " + _REF_UNITS,
           category="units", units=True)
def _bound_groups(ctx, args, span):
    m_arg, c_arg, key, t = args
    return _bounded_groups(ctx, m_arg, c_arg, key, t, span, "bound_groups", None, {})


@primitive("bound_groups_in", ("keys", "m", "c", "key", "t"),
           "list string -> (m : int) -> (c : int) -> ('a -> string | int) -> bag 'a (unit u) -o[m c] "
           "parts keys (bag 'a)",
           "bound_groups_in keys m c key t: bound_groups over a public list of keys (a list released by "
           "select_keys, or written out): one part per key, rows whose key is not in the list dropped, then "
           "at most m groups per unit and c rows per unit and group.",
           "As bound_groups; the keys are public (released or constant), so which part a row goes to "
           "depends on that row and public values only, and dropping the rows of other keys is a filter "
           "(docs/soundness.md, rules Bounded groups and Released keys). " + _REF_UNITS,
           category="units", units=True)
def _bound_groups_in(ctx, args, span):
    keys_arg, m_arg, c_arg, key, t = args
    keys, info = _released_keys(ctx, keys_arg, "bound_groups_in")
    out = _bounded_groups(ctx, m_arg, c_arg, key, t, span, "bound_groups_in", keys, info)
    out.ir_args = [keys_arg.ir, *out.ir_args]
    return out


# rule Released keys: a partition over a public list of keys, one part symbol for all of them
@primitive("groupby_in", ("keys", "key", "b"), "list string -> ('a -> string | int) -> bag 'a -o parts keys (bag 'a)",
           "groupby_in keys key b: one part per key of the public list keys (released by select_keys, or "
           "written out), in its order, empty parts included; rows whose key is not in the list are dropped.",
           "Each row lands in at most one part, chosen by its own key and the public list: sum_k d_k <= d(b) "
           "(parallel composition). When the list is released, every part is treated alike, so one "
           "distance variable stands for each of them (docs/soundness.md, rule Released keys). " + _REF_SELECTION,
           category="units", units=False)
def _groupby_in(ctx, args, span):
    keys_arg, key, b = args
    if not isinstance(b.type, Bag):
        raise ctx.fail("E0202", f"groupby_in expects a bag, but this is {b.type}", b.span)
    keys, info = _released_keys(ctx, keys_arg, "groupby_in")
    inst, captured = row_function(ctx, key, b.type.elem, span)
    info = {**info, "key_kind": _key_kind(ctx, inst.cod, key.span, "groupby_in")}
    released = keys is None
    labels = ["released"] if released else list(keys)
    parts = ctx.split(d_add(b.dist, captured), labels, uniform=released)
    return Result(Parts(() if released else keys, Bag(b.type.elem), released), d_add(*parts),
                  ir_args=[keys_arg.ir, inst.code, b.ir], parts=parts, info=info)


# ---- partition selection --------------------------------------------------------------------------

def public_delta(ctx, arg: Arg, prim: str) -> Fraction:
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E0209", f"delta of {prim} must be a public constant (a literal or a param)", arg.span)
    value = Fraction(arg.const)
    if not 0 < value < 1:
        raise ctx.fail("E0213", f"delta of {prim} must be between 0 and 1 (exclusive), got {value}", arg.span)
    return value


# rule Partition selection: the threshold, certified
def selection_threshold(eps: Fraction, delta: Fraction, m: int, sens: Fraction) -> int:
    """The smallest whole T with (m s) * P[Z >= T - s] <= delta, Z discrete Laplace of scale
    m s / eps (q = exp(-eps/(m s)); P[Z >= j] = q^j / (1 + q) for j >= 1): a key that only the
    larger of two neighbouring tables has has at most s units, and at most m s such keys, so the
    probability that any of them is released is at most delta.  Certified with interval
    arithmetic (the inequality is checked on an interval that contains the exact value)."""
    from mpmath import iv

    scale = Fraction(m) * sens / eps
    n_new = Fraction(m) * sens
    iv.dps = 60

    def ok(t: int) -> bool:
        j = Fraction(t) - sens
        if j < 1:
            return False
        q = iv.exp(-iv.mpf(1) / _iv(iv, scale))
        bound = _iv(iv, n_new) * q ** _iv(iv, j) / (1 + q)
        return bound.b <= _iv(iv, delta).a

    import math
    guess = sens + 1 + float(scale) * max(0.0, math.log(float(n_new) / float(delta)))
    t = max(1, math.floor(guess) - 2)
    while not ok(t):
        t += 1
    while t > 1 and ok(t - 1):
        t -= 1
    return t


def _iv(iv, x: Fraction):
    return iv.mpf(x.numerator) / iv.mpf(x.denominator)


# rule Partition selection: eps-DP counts thresholded; the keys only the larger table has cost delta
@primitive("select_keys", ("eps", "delta", "m", "key", "t"),
           "(eps : num) -> (delta : num) -> (m : int) -> ('a -> string | int) -> bag 'a (unit u) -o[eps; delta] "
           "fuzzy (list string)",
           "select_keys eps delta m key t: the keys (as strings, sorted) that enough units of t have: each unit "
           "counts in at most m of its keys (chosen at random), each key's count of units gets discrete Laplace "
           "noise of scale m/eps, and the keys whose noisy count reaches a threshold derived from eps, delta and m "
           "are released. Costs eps, and delta (not pure: a program using it needs a delta). On a table without "
           "a unit each row is a unit (use m = 1).",
           "Desfontaines et al. 2022 (Laplace thresholding): on the keys both neighbouring tables have, the "
           "released set is post-processing of noisy counts that move by at most m in L1, so eps-DP; a key only "
           "the larger table has has count 1 and is released with probability q^(T-1)/(1+q), at most delta/m, "
           "for each of at most m such keys. The checker adds the eps to the pure releases and the delta to the "
           "program's delta (docs/soundness.md and docs/privacy-notions.md, rule Partition selection). "
           + _REF_SELECTION,
           category="mechanism", is_mechanism=True, units=True)
def _select_keys(ctx, args, span):
    return _partition_selection(ctx, args, span, "select_keys")


# rule Partition selection, rule Optimal partition selection: one declaration, two release rules
def _partition_selection(ctx, args, span, prim: str) -> Result:
    """Rules Partition selection and Optimal partition selection: eps in the pure part, delta in
    channel D on the input's one symbol; the runtime's threshold or keep curve for S = the
    proven sensitivity of the input."""
    eps_arg, delta_arg, m_arg, key, t = args
    eps = public_epsilon(ctx, eps_arg)
    delta = public_delta(ctx, delta_arg, prim)
    m = whole_bound(ctx, m_arg, "m", prim)
    elem, unit = _row_source(ctx, t, prim)
    inst, captured = row_function(ctx, key, elem, span)
    kind = _key_kind(ctx, inst.cod, key.span, prim)
    moves = linear_part(d_add(t.dist, captured))
    sens = ctx.sensitivity(moves, t.span) if moves else Fraction(0)
    optimal = prim == "select_keys_optimal"
    if optimal:
        threshold = optimal_half_count(ctx, eps, delta, m, sens, delta_arg.span) if sens else 1
    else:
        threshold = selection_threshold(eps, delta, m, sens) if sens else 1
    extra = {"delta": delta if sens else Fraction(0), "threshold": threshold, "groups": m,
             **({"method": "optimal"} if optimal else {})}
    _, scale, cost = charge(ctx, prim, eps, moves, t.span, span, Fraction(m), extra, sens)
    dist = d_add(pure_release(cost), delta_of_release(delta, moves))
    info = {"epsilon": eps, "delta": delta, "m": m, "scale": scale, "sensitivity": sens, "threshold": threshold,
            "unit": unit, "key_kind": kind, "charged": eps if sens else Fraction(0),
            **({"method": "optimal"} if optimal else {})}
    return Result(Fuzzy(ListT(STRING)), dist, info=info,
                  ir_args=[eps_arg.ir, delta_arg.ir, m_arg.ir, inst.code, t.ir])


# rule Optimal partition selection: the count at which a key is kept with probability 1/2
def optimal_half_count(ctx, eps: Fraction, delta: Fraction, m: int, sens: Fraction, span) -> int:
    """The smallest number of units with which select_keys_optimal keeps a key with probability
    at least 1/2; E0213 when the curve does not reach 1 in MAX_STEPS steps."""
    # imported here: the accounting package loads numpy, which checking a program does not need
    from ..accounting.partition_selection import MAX_STEPS, keep_curve

    curve = keep_curve(eps, delta, m, selection_step(sens))
    if not curve.complete:
        raise ctx.fail("E0213", f"select_keys_optimal's keep curve for eps {eps}, delta {delta}, m {m} and a "
                       f"sensitivity of {sens} does not reach 1 in {MAX_STEPS} steps: eps/(m S) or delta/(m S) is "
                       "too small", span, "give a larger eps or delta, a smaller m, or use select_keys")
    return curve.half_count()


def selection_step(sens: Fraction) -> Fraction:
    """The units per step of the keep curve: the proven sensitivity, rounded up to a whole number
    (a count moves by at most that many units)."""
    return Fraction(math.ceil(sens))


# rule Optimal partition selection: each key kept with the optimal (eps/(mS), delta/(mS)) curve
@primitive("select_keys_optimal", ("eps", "delta", "m", "key", "t"),
           "(eps : num) -> (delta : num) -> (m : int) -> ('a -> string | int) -> bag 'a (unit u) -o[eps; delta] "
           "fuzzy (list string)",
           "select_keys_optimal eps delta m key t: select_keys with the optimal release rule of Desfontaines et "
           "al.: a key with n units is released with probability pi(n), the largest keep-probability curve that "
           "is (eps/m, delta/m)-DP per key (per unit of the input's sensitivity), computed exactly. Releases keys "
           "with fewer units than select_keys at the same eps, delta and m; costs eps and delta as select_keys.",
           "Desfontaines et al. 2022, section 4: pi(0) = 0, pi(n) = min(e^e pi(n-1) + d, 1 - e^-e (1 - pi(n-1) - "
           "d), 1) is (e, d)-DP for a count that moves by one; one unit moves at most m keys (m S for an input "
           "that moves by S, counts read in steps of S), so by composition e = eps/(m S), d = delta/(m S). Each "
           "key's pair of laws splits into an eps/(m S)-DP good part and a bad event of probability at most d on "
           "each side, so the accountant treats it as select_keys (docs/soundness.md, rule "
           "Optimal partition selection). " + _REF_OPTIMAL,
           category="mechanism", is_mechanism=True, units=True)
def _select_keys_optimal(ctx, args, span):
    return _partition_selection(ctx, args, span, "select_keys_optimal")


__all__ = ["MAX_BOUND", "SCALAR_TYPES", "SELECTIONS", "first_unit", "optimal_half_count", "refuse_units",
           "selection_threshold", "unit_table", "whole_bound"]

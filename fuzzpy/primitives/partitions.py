"""Partitions over a finite, public set of keys, and operations on their parts.

`groupby key b` maps every declared key to its part, empty parts included (whether a key is
present is itself private).  Each part gets a fresh distance variable d_k with
d_1 + ... + d_k <= d(b) (Spar's distance variables, as PrivJail implements them), so
mechanisms applied to different parts compose in parallel and unions of parts follow
PrivJail's generalised parallel composition.  Their evaluators are in
fuzzpy/runtime/kernels/partitions.py.
"""

from __future__ import annotations

from fractions import Fraction

from ..diagnostics import FuzzError
from ..typesystem import ir as I
from ..typesystem.keys import Reading
from ..typesystem.sens import Dist, d_add, d_inf
from ..typesystem.types import Bag, Cat, Fuzzy, ListT, Num, Parts, Str, Tensor
from .bags import elem_type, row_function
from .declarations import Result, primitive

_REF = "PrivJail (seed 003) section 4.3 and appendix B; Spar distance variables"


MAX_INT_KEYS = 100_000
MAX_RELEASED_KEYS = 100_000  # a partition over released keys with more keys stops the run (E0604)


@primitive("groupby", ("key", "b"), "('a -> cat K | int[lo, hi] | (K1, K2, ...)) -> bag 'a -o parts K (bag 'a)",
           "groupby key b: one part per declared value of key (a row function returning a category, "
           "an int with public bounds [lo, hi]: keys \"lo\" .. \"hi\", or a tuple of those: a crosstab "
           "with keys \"k1, k2\"), empty parts included.",
           "Each row lands in exactly one part, so sum_k d_k <= d(b); the keys come from the declared "
           "category, never from the data. " + _REF,
           category="partition")
def _groupby(ctx, args, span):
    key, b = args
    elem = elem_type(ctx, b, "groupby")
    inst, captured = row_function(ctx, key, elem, span)
    keys, info = _key_domain(ctx, inst.cod, key.span)
    readings = key_readings(inst.code)
    if len(readings) == len(info.get("product", [info])):  # how the run labels its releases (typesystem/keys.py)
        info["readings"] = tuple(readings)
    parts = ctx.split(d_add(b.dist, captured), list(keys))
    return Result(Parts(keys, Bag(elem)), d_add(*parts), ir_args=[inst.code, b.ir], parts=parts, info=info)


def key_readings(code: I.IR) -> list[Reading]:
    """The reading of each component of a key function's result, where its code shows one:
    `r.sex` is the column sex, `bin 10 r.age` the column age in bins of width 10."""
    body = _result_of(code)
    items = body.items if isinstance(body, I.ITuple) else [body]
    return [_reading(item) for item in items]


def _result_of(code: I.IR, depth: int = 0) -> I.IR:
    """The expression a function's code returns, through lambdas, applications and lets."""
    while depth < 50:
        depth += 1
        if isinstance(code, I.ILambda):
            code = code.body
        elif isinstance(code, I.IApply) and code.body is not None:
            code = code.body
        elif isinstance(code, I.ICall) and code.instance.body is not None:
            code = code.instance.body
        elif isinstance(code, I.ILet):
            code = code.body
        else:
            break
    return code


def _reading(item: I.IR) -> Reading:
    item = _result_of(item)
    width = None
    if isinstance(item, I.IPrim) and item.name == "bin" and all(isinstance(a, I.IConst) for a in item.args[:2]):
        width = Fraction(item.args[0].value) / Fraction(item.args[1].value)
        item = _result_of(item.args[2])
    elif isinstance(item, I.IPrim) and item.name == "floor":
        item = _result_of(item.args[0])
    return (item.name if isinstance(item, I.IField) else None), width


def _key_domain(ctx, t, span) -> tuple[tuple[str, ...], dict]:
    """The public keys of a partition: a category's values, a bounded int's range, or the
    product of those for a tuple key (a crosstab; keys joined with ", ")."""
    if isinstance(t, Tensor) and len(t.items) >= 2:
        if any(isinstance(item, Tensor) for item in t.items):
            raise ctx.fail("E0307", f"a crosstab key must be a flat tuple of categories or bounded ints, not {t}", span)
        subs = [_key_domain(ctx, item, span)[1] for item in t.items]
        keys: list[str] = [""]
        for sub in subs:
            keys = [f"{k}, {v}" if k else v for k in keys for v in sub["keys"]]
        if len(keys) > MAX_INT_KEYS:
            raise ctx.fail("E0307", f"this crosstab has {len(keys)} cells; at most {MAX_INT_KEYS} are allowed", span)
        if len(set(keys)) != len(keys):
            raise ctx.fail("E0307", "this crosstab's cells would have the same name (a category value contains "
                           "\", \"); rename the categories", span)
        return tuple(keys), {"keys": tuple(keys), "product": subs}
    if isinstance(t, Cat):
        return t.values, {"keys": t.values}
    if isinstance(t, Num) and t.integer and t.bounded and 0 <= t.hi - t.lo < MAX_INT_KEYS:
        lo, hi = int(t.lo), int(t.hi)
        keys = tuple(str(i) for i in range(lo, hi + 1))
        return keys, {"keys": keys, "int_lo": lo}
    raise ctx.fail("E0307", f"groupby needs a key with a finite, declared set of values, but the key is {t}",
                   span, "declare the column as a category in the schema, e.g. sex : cat{\"Male\", \"Female\"}, "
                   "or make the key a bounded int, e.g. clip 0 3 (nearest p)")


@primitive("values_of", ("key", "b"), "('a -> cat K | int[lo, hi]) -> bag 'a -o[0] list K",
           "values_of key b: every value the schema declares for key, as a public list: a category's values "
           "in declared order, or a bounded int's lo .. hi (e.g. the candidates of top_k: "
           "top_k eps 3 (values_of (fun r -> r.occupation) db) (fun r -> r.occupation) db).",
           "The list is read from the declared type of key at check time, never from the rows of b (the key "
           "is not applied): a public constant, 0-sensitive in b. " + _REF,
           category="partition")
def _values_of(ctx, args, span):
    key, b = args
    elem = elem_type(ctx, b, "values_of")
    inst, _ = row_function(ctx, key, elem, span)  # never applied: what it captures is not read
    if isinstance(inst.cod, Tensor):
        raise ctx.fail("E0307", f"values_of needs a key of one category or bounded int, but the key is {inst.cod}",
                       key.span, "take the values of each component separately")
    keys, info = _key_domain(ctx, inst.cod, key.span)
    if isinstance(inst.cod, Cat):
        return Result(ListT(Str()), {}, const=tuple(keys), info={"values": tuple(keys)})
    lo, hi = info["int_lo"], info["int_lo"] + len(keys) - 1
    values = tuple(range(lo, hi + 1))
    return Result(ListT(Num(Fraction(lo), Fraction(hi), True)), {}, const=values, info={"values": values})


def _parts_type(ctx, arg, what):
    if not isinstance(arg.type, Parts):
        raise ctx.fail("E0202", f"{what} expects the parts of a partition, but this is {arg.type}", arg.span)
    return arg.type


def _parts_dists(ctx, arg):
    """Per-key distances; a partition known only by its type gets fresh part variables
    (its metric is the sum over parts, so they satisfy sum_k d_k <= d(whole)).  The parts of
    released keys have one variable standing for every part (rule Released keys)."""
    if arg.parts is not None:
        return arg.parts
    labels = ["released"] if arg.type.released else list(arg.type.keys)
    if not arg.dist:
        return [{} for _ in labels]
    return ctx.split(arg.dist, labels, [arg.type.elem] * len(labels), uniform=arg.type.released)


def part_count(t: Parts) -> int:
    """How many parts a partition has at most: its keys, or for released keys the most a run
    accepts (rule Released keys)."""
    return MAX_RELEASED_KEYS if t.released else len(t.keys)


@primitive("part", ("ps", "key"), "parts K 'a -o string -> 'a",
           "part ps \"key\": the part of a partition for one key (ps.key works for keys that are names).",
           "Projection from a tensor of parts is 1-sensitive in that part's distance variable. " + _REF,
           category="partition")
def _part(ctx, args, span):
    ps, key = args
    t = _parts_type(ctx, ps, "part")
    if t.released:
        raise ctx.fail("E0205", "part: the keys of this partition are released when the program runs, so no "
                       "key can be named here", key.span, "use each or pmap, which treat every released key alike")
    if not key.is_const or key.const not in t.keys:
        raise ctx.fail("E0205", f"part: the key must be one of the declared keys {list(t.keys)}", key.span)
    i = t.keys.index(key.const)
    return Result(t.elem, _parts_dists(ctx, ps)[i], info={"index": i})


# rule Captured per part: f once per key, its parameter mapped onto each part
def _per_part(ctx, f, ps, span, fuzzy: bool):
    t = _parts_type(ctx, ps, "each" if fuzzy else "pmap")
    inst = ctx.instantiate(f, [t.elem], span, times=part_count(t), quadratic=True)  # once per key
    if fuzzy and not isinstance(inst.cod, Fuzzy):
        raise ctx.fail("E0202", f"each expects a function returning a distribution, but it returns {inst.cod}",
                       f.span, "use pmap for a function that releases nothing")
    k = inst.param_coefs[0]
    captured = _captured_per_part(t, inst.captured)
    quad = inst.quad[0] if inst.quad else {}
    # Each part's Gaussian releases cost rho per unit of its distance squared (rule Rho); the parts
    # are split symbols, so their maximum is taken where they are eliminated.
    parts = [d_add(ctx.scale_apply(k, d, span), ctx.lift(quad, d, span), captured) for d in _parts_dists(ctx, ps)]
    return inst, parts


# rule Captured per part
def _captured_per_part(t: Parts, captured: Dist) -> Dist:
    """What each part's result owes to what the function captures.  The function runs once per
    part, so each part's result moves by the captured distance (with its release costs), and the
    parts' sum counts it once per key: a public number for declared keys.  Released keys are as
    many as the data makes them, up to a bound of runs, not of the distance: infinite there."""
    return d_inf(captured) if t.released else dict(captured)


@primitive("pmap", ("f", "ps"), "('a -o[s] 'b) -> parts K 'a -o[s] parts K 'b",
           "pmap f ps: apply f to every part (no release).",
           "An s-sensitive function applied to each component of a tensor is s-sensitive in each "
           "component's distance variable; what f captures besides its part moves every part, so the "
           "parts' sum counts it once per key (infinite over released keys). " + _REF,
           category="partition")
def _pmap(ctx, args, span):
    f, ps = args
    inst, parts = _per_part(ctx, f, ps, span, fuzzy=False)
    return Result(Parts(ps.type.keys, inst.cod, ps.type.released), d_add(*parts), ir_args=[inst.code, ps.ir],
                  parts=parts)


@primitive("each", ("f", "ps"), "('a -o[s] fuzzy 'b) -> parts K 'a -o[s] fuzzy (parts K 'b)",
           "each f ps: run the mechanism f on every part and release all results (a map from key to value).",
           "Releases on disjoint parts compose in parallel: the cost is sum_k s * d_k <= s * d(b) "
           "(parallel composition; PrivJail appendix B for unions of parts), plus n * C for what f "
           "captures (C, read once per key of n; infinite over released keys: docs/soundness.md, rule "
           "Captured per part). " + _REF,
           category="partition")
def _each(ctx, args, span):
    f, ps = args
    inst, parts = _per_part(ctx, f, ps, span, fuzzy=True)
    together = _cost_together(ctx, parts, span)
    return Result(Fuzzy(Parts(ps.type.keys, inst.cod.inner, ps.type.released)), d_add(*parts),
                  ir_args=[inst.code, ps.ir], info={} if together is None else {"together": together})


def _cost_together(ctx, parts: list, span) -> Fraction | None:
    """The pure epsilon of all the parts' releases together, per unit of distance of the table
    they come from (the parts eliminated: eps for a groupby, by parallel composition; eps*m*c for
    bound_groups), so that each released line can state it; None when it is not one constant
    (an unsolved recursion, an infinitely sensitive part, or no pure release)."""
    try:
        together = ctx.sensitivity(d_add(*parts), span)
    except FuzzError:
        return None
    return together if together > 0 else None


@primitive("values", ("ps",), "parts K 'a -o list 'a",
           "values ps: the parts' values as a list, in declared key order (e.g. released per-group "
           "results, to feed the next iteration of an algorithm).",
           "A list's distance is the sum of its elements' distances, like the parts'. " + _REF,
           category="partition")
def _values(ctx, args, span):
    (ps,) = args
    t = _parts_type(ctx, ps, "values")
    return Result(ListT(t.elem), d_add(*_parts_dists(ctx, ps)) if ps.dist else {})

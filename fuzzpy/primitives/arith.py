"""Arithmetic, comparison and boolean primitives (the operators) and numeric helpers.

Each one's `fold` is its exact semantics on numbers (Fractions; the checker folds constants with
it, and the runtime computes outside row functions with it); the runtime's evaluators are in
fuzzpy/runtime/kernels/arith.py.  None of them may raise on a data-dependent value: an error
message would then depend on private data.
"""

from __future__ import annotations

import operator
from fractions import Fraction

from ..hints import PRIVATE_DIVISOR, hint
from ..typesystem import ir as I
from ..typesystem.effects import FAIL
from ..typesystem.sens import INF, ONE, ZERO, d_add, d_inf, d_scale, max_abs
from ..typesystem.types import (
    BOOL,
    INT,
    NUM,
    Bool,
    Cat,
    Fuzzy,
    ListT,
    Num,
    Record,
    Str,
    SumT,
    Tensor,
    With,
)
from .declarations import NOCONST, Arg, Result, primitive

_REF_FUZZ = "Reed & Pierce, Distance Makes the Types Grow Stronger (ICFP 2010), section 3"


def _num(ctx, arg: Arg, op: str) -> Num:
    if not isinstance(arg.type, Num):
        raise ctx.fail("E0202", f"operator {op} expects a number, but this is {arg.type}", arg.span,
                       *_sample_hint(arg))
    return arg.type


def _sample_hint(*args: Arg) -> list[str]:
    """A distribution where a value was meant: `let n = laplace ...` instead of `sample n = ...`."""
    return [hint("missing-sample")] if any(isinstance(a.type, Fuzzy) for a in args) else []


def _abs_bound(t: Num, arg: Arg):
    """Largest |value| of an argument: exact for constants, from declared bounds otherwise."""
    if arg.is_const:
        c = _exact(arg.const)
        return c if c.numerator >= 0 else -c  # abs(c), without the copy Fraction's abs builds
    if t.bounded:
        return max_abs(t.lo, t.hi)
    return INF


def _interval(lo_hi_pairs, integer: bool) -> Num:
    los = [lo for lo, _ in lo_hi_pairs]
    his = [hi for _, hi in lo_hi_pairs]
    if any(v is None for v in los + his):
        return _unbounded(integer)
    return Num(min(los), max(his), integer)


def _bounds(lo, hi, integer: bool) -> Num:
    """_interval of one pair, without its lists: every `+` and `-` asks for it."""
    return _unbounded(integer) if lo is None or hi is None else Num(lo, hi, integer)


def _const_type(value: Fraction, integer: bool) -> Num:
    return Num(value, value, integer)


def _arith_type(op: str, a: Num, b: Num, ac, bc) -> Num:
    integer = a.integer and b.integer and op != "/"
    alo, ahi = (ac, ac) if ac is not NOCONST else (a.lo, a.hi)
    blo, bhi = (bc, bc) if bc is not NOCONST else (b.lo, b.hi)
    if op == "+":
        return _bounds(_s(alo, blo, operator.add), _s(ahi, bhi, operator.add), integer)
    if op == "-":
        return _bounds(_s(alo, bhi, operator.sub), _s(ahi, blo, operator.sub), integer)
    if op == "*":
        if alo is None or ahi is None or blo is None or bhi is None:  # (not `in`: Fraction == None is slow)
            return _unbounded(integer)
        prods = [x * y for x in (alo, ahi) for y in (blo, bhi)]
        return Num(min(prods), max(prods), integer)
    # division: bounded only by a non-zero constant divisor
    if bc is not NOCONST and bc != 0 and None not in (alo, ahi):
        qs = [alo / bc, ahi / bc]
        return Num(min(qs), max(qs), False)
    return NUM


def _unbounded(integer: bool) -> Num:
    """`int` or `num`: the shared instances (they keep their hash), not a new type per operation."""
    return INT if integer else NUM


def _s(x, y, f):
    return None if x is None or y is None else f(x, y)


MAX_CONSTANT_BITS = 4096


def _fold(ctx, op: str, a: Arg, b: Arg, span):
    if not (a.is_const and b.is_const):
        return NOCONST
    if op == "/" and b.const == 0:
        raise ctx.fail("E0213", "division by zero in a constant expression", span)
    value = _EXACT_OPS[op](_exact(a.const), _exact(b.const))
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_CONSTANT_BITS:
        # Exact constants could otherwise grow without bound (x * x, 30 times) and hang the check.
        raise ctx.fail("E0213", f"this constant expression has more than {MAX_CONSTANT_BITS} bits", span)
    return value


_EXACT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _exact(x) -> Fraction:
    """Fraction(x), without building a copy of a Fraction (the common case: constants are exact)."""
    return x if type(x) is Fraction else Fraction(x)


def _arith_rule(op: str):
    def rule(ctx, args: list[Arg], span) -> Result:
        a, b = args
        # (the common case inline, for every operator: two numbers, not both constants)
        ta = a.type if a.type.__class__ is Num else _num(ctx, a, op)
        tb = b.type if b.type.__class__ is Num else _num(ctx, b, op)
        const = _fold(ctx, op, a, b, span) if a.const is not NOCONST and b.const is not NOCONST else NOCONST
        if const is not NOCONST:  # (only _arith_type's integer flag is needed: its bounds are not computed)
            return Result(_const_type(const, ta.integer and tb.integer and op != "/"), {}, const)
        rtype = _arith_type(op, ta, tb, a.const, b.const)
        if op in "+-":
            dist = d_add(a.dist, b.dist)
        elif op == "*":
            # (a side at distance {} scales to {} whatever its factor: that factor is not computed)
            dist = d_add(_scaled(_abs_bound(tb, b), a.dist) if a.dist else {},
                         _scaled(_abs_bound(ta, a), b.dist) if b.dist else {})
        else:  # division: Lipschitz only when dividing by a public non-zero constant
            if b.is_const and b.const != 0:
                dist = d_scale(1 / abs(Fraction(b.const)), a.dist)
            else:
                dist = d_inf(d_add(a.dist, b.dist))
                ctx.note_infinite(span, b.dist, PRIVATE_DIVISOR)  # for the hint at the mechanism
        return Result(rtype, dist, risk=_exact_size_risk(op, a, b, rtype) if op in "*/" else {})
    return rule


def _exact_size_risk(op: str, a: Arg, b: Arg, result: Num) -> dict:
    """Rule Exact (docs/soundness.md): outside row functions numbers are exact, and a product or
    quotient has as many digits as its two operands together.  Repeating one (squaring 40 times,
    or x + 1/x, whose denominators multiply) builds numbers so large that the run may not finish:
    FAIL, unless a factor (for `/`, the divisor) is small: a constant or a bounded integer, which
    adds a bounded number of digits each time.  When both operands are private (or the divisor
    is), how large depends on the data: a risk on what they depend on.  A bounded integer result
    has a size its bounds fix.  Inside a row function, which computes in floats, the risk is
    dropped with the rest of the row's."""
    if op not in "*/" or (result.integer and result.bounded):
        return {}
    if (op == "/" and _small(b)) or (op == "*" and (_small(a) or _small(b))):
        return {}
    private = [x for x in (a, b) if x.dist and not x.is_const]
    risk = {FAIL: ONE}
    if len(private) == 2 or (op == "/" and b.dist):  # ... and how fast depends on the data
        risk.update({s: ONE for s in {**a.dist, **b.dist}})
    return risk


def _small(x: Arg) -> bool:
    """A factor whose digits are bounded whatever the data: a constant or a bounded integer."""
    return x.is_const or (isinstance(x.type, Num) and x.type.integer and x.type.bounded)


def _scaled(k, dist):
    """k * dist with 0 * inf = 0: x * 0 is 0 at run time whatever x is (`mul`'s fold, and
    runtime/kernels/arith.mul in row functions), so the value does not move; computing x may
    still fail, which its failure risk carries (soundness.md)."""
    return d_scale(k, dist)


def _fold_div(x, y):
    """Exact division, total: x / 0 is 0 (a private divisor makes the result infinitely
    sensitive in the checker anyway; the run must not fail on it); an infinite or NaN operand
    (public, from `exp` or a saturated release) divides as a float."""
    if y == 0:
        return Fraction(0)
    if isinstance(x, float) or isinstance(y, float):
        return x / y
    return Fraction(x) / Fraction(y)


# Exact semantics on scalars (Python ints and Fractions): the interpreter evaluates arithmetic
# outside row functions with these, so a value reaching a mechanism moves exactly as the checker
# proved (float rounding could turn a 1-sensitive count into a jump of 2^30).
def fold_mul(x, y):
    """Exact product, with 0 * x = 0 even for an infinite or undefined x (as over the reals)."""
    return Fraction(0) if x == 0 or y == 0 else x * y


_FOLDS = {"+": operator.add, "-": operator.sub, "/": _fold_div, "*": fold_mul}

_ARITH_DOC = {
    "+": ("add", "num -o num -o num", "Addition; bounds add (interval arithmetic).",
          "|(x+y)-(x'+y')| <= |x-x'| + |y-y'|: 1-sensitive in each argument. " + _REF_FUZZ),
    "-": ("sub", "num -o num -o num", "Subtraction.",
          "|(x-y)-(x'-y')| <= |x-x'| + |y-y'|. " + _REF_FUZZ),
    "*": ("mul", "num -o[B_y] num -o[B_x] num",
          "Multiplication; scaling by a constant c is |c|-sensitive; a product of two values is "
          "sensitive by the other factor's bound (infinite if it has none).",
          "xy - x'y' = x(y-y') + y'(x-x'), so |xy - x'y'| <= B_x|y-y'| + B_y|x-x'| where B bounds |x|, |y|. "
          "At run time 0 * x is 0 even for an infinite or undefined x, as over the reals."),
    "/": ("div", "num -o[1/|c|] num -> num", "Division; Lipschitz only when the divisor is a non-zero constant.",
          "x/c moves by |x-x'|/|c|; a private divisor can make the quotient jump arbitrarily (infinite)."),
}

for _op, (_name, _sig, _doc, _why) in _ARITH_DOC.items():
    primitive(_name, ("x", "y"), _sig, _doc, _why, category="arithmetic", vectorised=True,
              fold=_FOLDS[_op])(_arith_rule(_op))


@primitive("neg", ("x",), "num -o num", "Negation.", "|-x - -x'| = |x-x'|.", category="arithmetic",
           vectorised=True, fold=operator.neg)
def _neg(ctx, args, span):
    (a,) = args
    t = _num(ctx, a, "-")
    if a.is_const:
        return Result(_const_type(-Fraction(a.const), t.integer), {}, -Fraction(a.const))
    lo, hi = t.lo, t.hi
    return Result(Num(None if hi is None else -hi, None if lo is None else -lo, t.integer), a.dist)


# ---- comparisons and booleans: results are discrete, so any dependence is infinite ---------

def _comparable(ctx, op: str, a: Arg, b: Arg) -> None:
    ta, tb = a.type, b.type
    if isinstance(ta, Num) and isinstance(tb, Num):
        return
    if op in ("==", "!="):
        textual = (Str, Cat)
        if isinstance(ta, textual) and isinstance(tb, textual):
            return
        if type(ta) is type(tb) and _equality_type(ta) and _equality_type(tb):
            return
    raise ctx.fail("E0202", f"cannot compare {ta} with {tb} using {op}", a.span,
                   "== and != compare numbers, booleans, strings, categories, and tuples, records, "
                   "sums and lists of those; not tables, partitions, functions or distributions",
                   *_sample_hint(a, b))


def _equality_type(t) -> bool:
    """Types whose equality is a plain value comparison (never one of tables or functions,
    whose comparison could succeed or fail depending on the rows)."""
    from ..typesystem.types import Hole, Unit, components

    if isinstance(t, (Num, Bool, Str, Cat, Unit, Hole)):
        return True
    parts = components(t)
    return parts is not None and all(_equality_type(p) for p in parts)


_NOT_CONST = object()


def _category_literals(ctx, op: str, a: Arg, b: Arg) -> None:
    """A string constant compared with a category (in either order, or inside tuples, records,
    lists and sums) must be one of the category's declared values.  Any other string can never
    be equal: `r.sex == "female"` against cat{"Male", "Female"} would select nothing, and `!=`
    everything, silently (E0214, with the closest declared value as a suggestion)."""
    for cat_side, other in ((a, b), (b, a)):
        value = other.const if other.is_const else _NOT_CONST
        for cat, literal, where in _misfits(cat_side.type, value, other.ir, other.span):
            verdict = "never holds" if op == "==" else "always holds"
            notes = [f"did you mean \"{close}\"?" for close in _closest(literal, cat.values)]
            shown = ", ".join(f'"{v}"' for v in cat.values[:12]) + (", ..." if len(cat.values) > 12 else "")
            notes.append(f"the declared values are {shown}")
            raise ctx.fail("E0214", f"\"{literal}\" is not a value of the category {_short(cat)}, so this "
                                    f"comparison {verdict}", where, *notes)


def _short(cat: Cat) -> str:
    text = str(cat)
    return text if len(text) <= 80 else "cat{...}"


def _closest(literal: str, values: tuple[str, ...]) -> list[str]:
    """The declared value the literal most likely meant: same letters in another case first."""
    import difflib

    folded = [v for v in values if v.casefold() == literal.casefold()]
    if folded:
        return folded[:1]
    return difflib.get_close_matches(literal, values, n=1, cutoff=0.6)


def _misfits(t, value, ir, span):
    """(category, string, span) for each string constant met at a category position of `t`:
    in the constant `value`, or else in the constant leaves of the expression `ir`."""
    where = getattr(ir, "span", None) or span
    if value is _NOT_CONST and isinstance(ir, I.IConst):
        value = ir.value
    if value is not _NOT_CONST:
        yield from _const_misfits(t, value, where)
        return
    if isinstance(t, (Tensor, With)) and isinstance(ir, I.ITuple) and len(ir.items) == len(t.items):
        for item_t, item in zip(t.items, ir.items):
            yield from _misfits(item_t, _NOT_CONST, item, where)
    elif isinstance(t, Record) and isinstance(ir, I.IRecord):
        types = dict(t.fields)
        for name, item in ir.fields:
            if name in types:
                yield from _misfits(types[name], _NOT_CONST, item, where)
    elif isinstance(t, ListT) and isinstance(ir, I.IList):
        for item in ir.items:
            yield from _misfits(t.elem, _NOT_CONST, item, where)
    elif isinstance(t, ListT) and isinstance(ir, I.ICons):
        yield from _misfits(t.elem, _NOT_CONST, ir.head, where)
        yield from _misfits(t, _NOT_CONST, ir.tail, where)
    elif isinstance(t, SumT) and isinstance(ir, I.IInject):
        yield from _misfits(t.left if ir.side == "inl" else t.right, _NOT_CONST, ir.value, where)


def _const_misfits(t, value, where):
    if isinstance(t, Cat):
        if isinstance(value, str) and value not in t.values:
            yield t, value, where
    elif isinstance(t, (Tensor, With)) and isinstance(value, tuple) and len(value) == len(t.items):
        for item_t, item in zip(t.items, value):
            yield from _const_misfits(item_t, item, where)
    elif isinstance(t, Record) and isinstance(value, tuple):
        types = dict(t.fields)
        for pair in value:
            if isinstance(pair, tuple) and len(pair) == 2 and pair[0] in types:
                yield from _const_misfits(types[pair[0]], pair[1], where)
    elif isinstance(t, ListT) and isinstance(value, (tuple, list)):
        for item in value:
            yield from _const_misfits(t.elem, item, where)
    elif isinstance(t, SumT) and isinstance(value, tuple) and len(value) == 2 and value[0] in ("inl", "inr"):
        yield from _const_misfits(t.left if value[0] == "inl" else t.right, value[1], where)


# rule Columns kept: a compound equality flags its node (ir.WHOLE_VALUES)
def _cmp_rule(op: str, fn):
    def rule(ctx, args, span):
        a, b = args
        _comparable(ctx, op, a, b)
        if op in ("==", "!="):
            _category_literals(ctx, op, a, b)
        if a.is_const and b.is_const:
            return Result(BOOL, {}, bool(fn(a.const, b.const)))
        # A compound equality reads every field of a record it holds: all columns are kept.
        whole = {I.WHOLE_VALUES: True} if not _scalar(a.type) or not _scalar(b.type) else {}
        return Result(BOOL, d_inf(d_add(a.dist, b.dist)), info=whole)
    return rule


def _scalar(t) -> bool:
    return isinstance(t, (Num, Bool, Str, Cat))


_CMP_WHY = ("Booleans carry the discrete metric (distance 0 or infinity), so a comparison is "
            "infinitely sensitive in anything private it reads. " + _REF_FUZZ)

for _op, _name, _fn in [("==", "eq", operator.eq), ("!=", "ne", operator.ne), ("<", "lt", operator.lt),
                        ("<=", "le", operator.le), (">", "gt", operator.gt), (">=", "ge", operator.ge)]:
    primitive(_name, ("x", "y"), "'a -> 'a -> bool", f"Comparison {_op}.", _CMP_WHY, category="comparison",
              vectorised=True, fold=_fn)(_cmp_rule(_op, _fn))


def _bool_rule(name: str, fn):
    def rule(ctx, args, span):
        for a in args:
            if not isinstance(a.type, Bool):
                raise ctx.fail("E0202", f"{name} expects booleans, but this is {a.type}", a.span)
        if all(a.is_const for a in args):
            return Result(BOOL, {}, bool(fn(*[a.const for a in args])))
        return Result(BOOL, d_inf(d_add(*[a.dist for a in args])))
    return rule


primitive("and", ("x", "y"), "bool -> bool -> bool", "Boolean and (&&).", _CMP_WHY, category="boolean",
          vectorised=True, fold=lambda x, y: bool(x and y))(_bool_rule("&&", lambda x, y: x and y))
primitive("or", ("x", "y"), "bool -> bool -> bool", "Boolean or (||).", _CMP_WHY, category="boolean",
          vectorised=True, fold=lambda x, y: bool(x or y))(_bool_rule("||", lambda x, y: x or y))
primitive("not", ("x",), "bool -o bool", "Boolean negation (!).", _CMP_WHY, category="boolean",
          vectorised=True, fold=lambda x: not x)(_bool_rule("!", lambda x: not x))


# ---- numeric helpers ------------------------------------------------------------------------

@primitive("clip", ("lo", "hi", "x"), "num -> num -> num -o num[lo, hi]",
           "clip lo hi x: x clamped into the public interval [lo, hi]; gives a bounded type for sums.",
           "Clamping to an interval is a projection onto a convex set, hence 1-Lipschitz; lo and hi "
           "must be public constants, so the bound never comes from the data.",
           category="numeric", vectorised=True, fold=lambda lo, hi, x: min(max(x, lo), hi))
def _clip(ctx, args, span):
    lo, hi, x = args
    for bound in (lo, hi):
        if not bound.is_const or not isinstance(bound.type, Num):
            released = isinstance(bound.type, Num) and not bound.dist  # public, known only at run time
            raise ctx.fail("E0209", "clip bounds must be public constants (literals or params)", bound.span,
                           *([hint("released-clip-bound")] if released else []))
    low, high = _exact(lo.const), _exact(hi.const)
    if low > high:
        raise ctx.fail("E0213", "clip: lower bound is above upper bound", span)
    t = _num(ctx, x, "clip")
    if x.is_const:
        v = min(max(_exact(x.const), low), high)
        return Result(_const_type(v, t.integer), {}, v)
    return Result(Num(low, high, t.integer and lo.type.integer and hi.type.integer), x.dist)


@primitive("abs", ("x",), "num -o num", "Absolute value.", "||x| - |x'|| <= |x - x'|.",
           category="numeric", vectorised=True, fold=abs)
def _abs(ctx, args, span):
    (x,) = args
    t = _num(ctx, x, "abs")
    if x.is_const:
        v = abs(Fraction(x.const))
        return Result(_const_type(v, t.integer), {}, v)
    hi = None if not t.bounded else max(abs(t.lo), abs(t.hi))
    lo = ZERO if not t.bounded or t.lo <= 0 <= t.hi else min(abs(t.lo), abs(t.hi))
    return Result(Num(lo, hi, t.integer), x.dist)


# ---- order statistics of two numbers -----------------------------------------------------------

def _minmax_rule(name: str, pick):
    def rule(ctx, args, span):
        a, b = args
        ta, tb = _num(ctx, a, name), _num(ctx, b, name)
        if a.is_const and b.is_const:
            v = pick(Fraction(a.const), Fraction(b.const))
            return Result(_const_type(v, ta.integer and tb.integer), {}, v)
        ta, tb = _exact_bounds(ta, a), _exact_bounds(tb, b)
        if pick is min:  # min x y <= y whatever x is: one known upper bound is enough
            lo, hi = _s(ta.lo, tb.lo, min), _one_sided(ta.hi, tb.hi, min)
        else:
            lo, hi = _one_sided(ta.lo, tb.lo, max), _s(ta.hi, tb.hi, max)
        return Result(Num(lo, hi, ta.integer and tb.integer), d_add(a.dist, b.dist))
    return rule


def _exact_bounds(t: Num, arg: Arg) -> Num:
    return Num(Fraction(arg.const), Fraction(arg.const), t.integer) if arg.is_const else t


def _one_sided(x, y, pick):
    """min of two upper bounds (or max of two lower bounds) where a missing one is unbounded."""
    known = [v for v in (x, y) if v is not None]
    return pick(known) if known else None


_MINMAX_WHY = ("min and max are 1-Lipschitz in each argument: |max(x,y) - max(x',y')| <= max(|x-x'|, |y-y'|) "
               "<= |x-x'| + |y-y'|.")
primitive("min", ("x", "y"), "num -o num -o num", "min x y: the smaller of two numbers.", _MINMAX_WHY,
          category="numeric", vectorised=True, fold=min)(_minmax_rule("min", min))
primitive("max", ("x", "y"), "num -o num -o num", "max x y: the larger of two numbers.", _MINMAX_WHY,
          category="numeric", vectorised=True, fold=max)(_minmax_rule("max", max))


@primitive("cswap", ("p",), "(num, num) -o (num, num)",
           "cswap (x, y): the pair in increasing order, (min x y, max x y); the building block of "
           "sorting networks and insertion sort.",
           "Fuzz (Reed & Pierce 2010, section 5) types the conditional swap as 1-sensitive on the tensor "
           "(L1) pair: |min - min'| + |max - max'| <= |x - x'| + |y - y'|.",
           category="numeric", vectorised=True)
def _cswap(ctx, args, span):
    from ..typesystem.types import Tensor

    (p,) = args
    t = p.type
    if not (isinstance(t, Tensor) and len(t.items) == 2 and all(isinstance(i, Num) for i in t.items)):
        raise ctx.fail("E0202", f"cswap expects a tensor pair of numbers (x, y), but this is {t}", p.span)
    a, b = t.items
    lo = Num(_s(a.lo, b.lo, min), _s(a.hi, b.hi, min), a.integer and b.integer)
    hi = Num(_s(a.lo, b.lo, max), _s(a.hi, b.hi, max), a.integer and b.integer)
    if p.is_const:
        x, y = Fraction(p.const[0]), Fraction(p.const[1])
        return Result(Tensor((lo, hi)), {}, (min(x, y), max(x, y)))
    return Result(Tensor((lo, hi)), p.dist)

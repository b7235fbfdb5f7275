"""Joins: a private table with a public one, and two private tables truncated on their keys.

A join pairs every row of one table with every row of the other that has the same value in the
key columns (an inner join; a missing key matches nothing).  What one added row does to the
result depends on how many rows of the *other* table share its key, so every rule here reads
that number from the other table's type (`KeyedBag`, typesystem/types.py): a public table's
declared keys (`unique`, `at most N per value`, verified when it is loaded), or the `k` of a
`truncate`.  A table with a privacy unit may be join_public's first table: the result keeps the
unit, at the table's distance in units (rule Unit join public); `truncate` and `join_private`
refuse it (rule Units).  The rules, their invariants and proofs are in docs/soundness.md (rules
Truncate, Table join, Public tables and Unit join public); the evaluators in
fuzzpy/runtime/kernels/joins.py.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Optional

from ..limits import MAX_PER_KEY
from ..typesystem.ir import EXPLAINED, READS_COLUMNS
from ..typesystem.sens import d_add, d_inf, d_scale
from ..typesystem.types import Bool, Cat, Num, Record, Str, Type, UnitBag, keyed_bag, origin_of, per_key_of
from .bags import elem_type
from .declarations import Arg, Result, primitive

_REF = ("Johnson, Near and Song, Towards Practical Differential Privacy for SQL Queries (elastic "
        "sensitivity), VLDB 2018; Kotsogiannis et al., PrivateSQL, VLDB 2019 (truncation); Tumult "
        "Analytics' join_public and join_private")

# IPrim.info of a join: the key columns of each side, and whether the right key is left out of
# the result (it has the left key's name, and the same value on every row of the result).
KEY_LEFT, KEY_RIGHT, SHARED_KEY = "key_left", "key_right", "shared_key"


def _column(ctx, key: Arg, elem: Type, table: Arg, what: str) -> tuple[str, Type]:
    """The key column named by a string constant, and its type."""
    if not key.is_const or not isinstance(key.const, str):
        raise ctx.fail("E0209", f"{what}: a key is a column name written as a string constant, e.g. \"tailnum\"",
                       key.span)
    if not isinstance(elem, Record):
        raise ctx.fail("E0202", f"{what} joins tables of records (rows of a schema), but these rows are {elem}",
                       table.span)
    t = elem.field_type(key.const)
    if t is None:
        names = ", ".join(n for n, _ in elem.fields)
        raise ctx.fail("E0205", f"{what}: the table has no column '{key.const}'", key.span,
                       f"its columns: {names}")
    if not isinstance(t, (Num, Str, Cat, Bool)):
        raise ctx.fail("E0202", f"{what}: key column '{key.const}' is {t}; a key is a number, string, category "
                       "or bool", key.span)
    return key.const, t


def _most(ctx, k: Arg) -> int:
    if not k.is_const or not isinstance(k.type, Num) or Fraction(k.const).denominator != 1 \
            or not 1 <= k.const <= MAX_PER_KEY:
        raise ctx.fail("E0209", f"truncate needs the rows to keep per key as a public whole number from 1 to "
                       f"{MAX_PER_KEY}", k.span)
    return int(k.const)


def _comparable(a: Type, b: Type) -> bool:
    """Can a value of a equal a value of b?  Numbers with numbers, text (strings and categories)
    with text, bools with bools."""
    text = (Str, Cat)
    return (isinstance(a, Num) and isinstance(b, Num)) or (isinstance(a, text) and isinstance(b, text)) \
        or (isinstance(a, Bool) and isinstance(b, Bool))


def _joined_row(ctx, left: Record, right: Record, key_l: str, key_r: str, span, what: str) -> tuple[Record, bool]:
    """The result's row: the left row's columns, then the right row's, the right key left out when
    it has the left key's name (both hold the same value).  Columns may keep their domains: a row
    of the result is a row of each side, joined.  Any other shared name is refused (E2301)."""
    shared = key_l == key_r
    taken = {n for n, _ in left.fields}
    clash = [n for n, _ in right.fields if n in taken and not (shared and n == key_r)]
    if clash:
        raise ctx.fail("E2301", f"{what}: both tables have a column named {', '.join(repr(c) for c in clash)}",
                       span, "rename it on the private side before the join, e.g. "
                       f"map (fun r -> {{ ..., {clash[0]}_2 = r.{clash[0]} }}) table (a public table "
                       "keeps its declared keys only as it is loaded)")
    fields = left.fields + tuple((n, t) for n, t in right.fields if not (shared and n == key_r))
    name = f"{left.name}*{right.name}" if left.name and right.name else None
    return Record(fields, name), shared


def _bound(ctx, side: Arg, column: str, what: str, which: str) -> int:
    most = per_key_of(side.type).get(column)
    if most is None:
        raise ctx.fail("E2302", f"{what}: nothing bounds the rows of the {which} table that share a value of "
                       f"'{column}'", side.span,
                       f"truncate it first: truncate 10 \"{column}\" table keeps at most 10 rows per value "
                       "(chosen at random); or, for a public table, declare the column unique (or at most N "
                       "per value) in its public schema")
    return most


# rule Table join: the result's bounds (invariant I6)
def _result_bounds(left: Arg, right: Arg, m_left: Optional[int], m_right: int, row: Record) -> dict[str, int]:
    """What bounds the result's rows per key: each left row pairs with at most m_right right rows,
    so a left bound p becomes p * m_right (and a right bound q, q * m_left)."""
    out: dict[str, int] = {}
    names = {n for n, _ in row.fields}
    for c, p in per_key_of(left.type).items():
        out[c] = p * m_right
    if m_left is not None:
        for c, q in per_key_of(right.type).items():
            if c in names:
                out[c] = min(out.get(c, q * m_left), q * m_left)
    return {c: m for c, m in out.items() if m <= MAX_PER_KEY}


def _why(side: Arg, column: str, most: int) -> str:
    """`at most 20 rows per tailnum (truncate 20, line 5)`: a bound and where it comes from."""
    rows = "one row" if most == 1 else f"at most {most} rows"
    where = origin_of(side.type).get(column)
    return f"{rows} per {column}" + (f" ({where})" if where else "")


def _joined(span, bounds: dict[str, int]) -> dict[str, str]:
    return {c: f"a join, line {span.line}" for c in bounds}


def join_info(key_l: str, key_r: str, shared: bool, **more) -> dict:
    return {KEY_LEFT: key_l, KEY_RIGHT: key_r, SHARED_KEY: shared, READS_COLUMNS: (key_l, key_r), **more}


# rule Truncate: at most k rows per key, 2-stable (the identity when the type already bounds it)
@primitive("truncate", ("k", "key", "b"), "int -> string -> bag 'a -o[2] bag 'a",
           "truncate k \"key\" b: at most k rows of b for each value of its column key (chosen at random "
           "among a value's rows when it has more; rows with a missing key are dropped): a private table made "
           "ready for join_private.",
           "One added row either joins a value with fewer than k rows (it is kept: 1 row more) or competes "
           "with that value's kept rows (it is kept and pushes one out, or it is not kept): the result moves "
           "by at most 2 rows, so truncate is 2-stable; a table whose type already bounds the value's rows by k "
           "is unchanged (1-stable). Which rows are kept depends only on the value's own rows and a secret "
           "drawn once per run, so adding a row never reorders the others (docs/soundness.md, rule Truncate). "
           + _REF,
           category="join")
def _truncate(ctx, args, span):
    k, key, b = args
    elem = elem_type(ctx, b, "truncate")
    most = _most(ctx, k)
    column, _ = _column(ctx, key, elem, b, "truncate")
    bounds = per_key_of(b.type)
    known = bounds.get(column)
    info = {"k": most, "key": column, READS_COLUMNS: (column,)}
    if known is not None and known <= most:  # already at most k rows per value: nothing to drop
        info[EXPLAINED] = (f"the table already has {_why(b, column, known)}, so truncate keeps every row: its "
                           "result moves as far as the table")
        return Result(b.type, b.dist, info=info)
    bounds[column] = most
    origin = {**origin_of(b.type), column: f"truncate {most}, line {span.line}"}
    kept = "one row" if most == 1 else f"at most {most} rows"
    info[EXPLAINED] = (f"{kept} per {column}; the result moves by at most 2 rows per row added to or removed from "
                       "the table (one row in, one out)")
    return Result(keyed_bag(elem, bounds, origin), d_scale(Fraction(2), b.dist), info=info)


# rule Table join: m_b * d(a) + inf * d(t), m_b from the public table's declared keys;
# rule Unit join public: a table with a unit keeps it, at its own distance in units
@primitive("join_public", ("key_a", "key_t", "a", "t"), "string -> string -> bag 'a -o[m] bag 'b -> bag ('a * 'b)",
           "join_public \"ka\" \"kt\" a t: every row of the table a paired with every row of the public table t "
           "whose column kt equals its column ka (an inner join). t's schema declares kt unique, or at most m "
           "rows per value; the result is m times as far as a (once, for a unique key). Columns from t keep "
           "their declared domains, so a groupby on them composes in parallel. When a has a privacy unit, each "
           "result row keeps its row of a's unit: the result is a table with that unit, as far as a.",
           "One row added to a pairs with the rows of t sharing its key, at most m (declared, and verified when "
           "t is loaded, before anything is charged), so the result moves by at most m rows per row of a. t is "
           "read as public data: the result is infinitely far apart for tables t that differ, so a private "
           "table given as t is refused. With a privacy unit on a, the result's rows of one unit are the join "
           "of that unit's rows of a alone, so a unit added, removed or changed in a adds, removes or changes "
           "that one unit of the result: the distance in units is a's, whatever m (docs/soundness.md, rules "
           "Table join, Public tables and Unit join public). " + _REF,
           category="join", units=True)
def _join_public(ctx, args, span):
    ka, kt, a, t = args
    _public_side_without_unit(ctx, t)
    ea, et = elem_type(ctx, a, "join_public", units=True), elem_type(ctx, t, "join_public")
    col_a, ta = _column(ctx, ka, ea, a, "join_public")
    col_t, tt = _column(ctx, kt, et, t, "join_public")
    _same_kind(ctx, ta, tt, col_a, col_t, span, "join_public")
    m = _bound(ctx, t, col_t, "join_public", "public")
    row, shared = _joined_row(ctx, ea, et, col_a, col_t, span, "join_public")
    ctx.note_infinite(t.span, t.dist, "join_public reads its second table as public data: a private table there "
                      "would be revealed (use join_private with truncated tables)")
    ctx.note_growth(d_scale(Fraction(m), a.dist))  # at most m result rows per row of a
    if isinstance(a.type, UnitBag):
        return _unit_join_public(ctx, a, t, row, m, col_a, col_t, shared)
    dist = d_add(d_scale(Fraction(m), a.dist), d_inf(t.dist))
    bounds = _result_bounds(a, t, None, m, row)
    why = (f"each row of the first table pairs with the public table's rows of its {col_t}, {_why(t, col_t, m)}: "
           f"the result moves by {m} row{'s' if m > 1 else ''} per row of the first table; the public table is "
           "public data")
    return Result(keyed_bag(row, bounds, _joined(span, bounds)), dist,
                  info=join_info(col_a, col_t, shared, most_right=m, **{EXPLAINED: why}))


# rule Unit join public: a table with a unit is never the public side
def _public_side_without_unit(ctx, t: Arg) -> None:
    """The public side of join_public is public data: a table with a privacy unit is private."""
    if isinstance(t.type, UnitBag):
        raise ctx.fail("E0330", f"join_public reads its second table as public data, but this is a private table "
                       f"whose privacy unit is {t.type.unit}", t.span,
                       "give the table with the unit as join_public's first table, and a public table (of a "
                       "`public schema`) as its second")


# rule Unit join public: (J(A, t))_v = J(A_v, t), so the block distance does not grow
def _unit_join_public(ctx, a: Arg, t: Arg, row: Record, m: int, col_a: str, col_t: str, shared: bool) -> Result:
    """join_public of a table with a privacy unit: the result has a's unit, at a's distance in
    units (and infinitely far in t, which must be public).  The unit column must be one of a's
    columns, so that every engine finds each result row's unit in the row itself."""
    unit = a.type.unit
    if a.type.elem.field_type(unit) is None:  # a Record: join_public checked its key column
        raise ctx.fail("E0330", f"join_public: the rows of the first table have no column '{unit}', their privacy "
                       f"unit, so the joined rows would lose it", a.span,
                       f"keep the column {unit} (under that name) in the rows of a map before the join, or bound "
                       f"the contributions first (bound_rows k t) and join the row-level table")
    dist = d_add(a.dist, d_inf(t.dist))
    why = (f"each row of the first table pairs with the public table's rows of its {col_t}, {_why(t, col_t, m)}, and "
           f"every result row keeps its row's {unit}: one {unit}'s rows of the result come from that {unit}'s rows "
           f"alone, so the result moves by as many {unit}s as the first table; the public table is public data")
    return Result(UnitBag(row, unit), dist,
                  info=join_info(col_a, col_t, shared, most_right=m, unit=unit, **{EXPLAINED: why}))


# rule Table join: m_b * d(a) + m_a * d(b), each m from the other side's type
@primitive("join_private", ("key_a", "key_b", "a", "b"),
           "string -> string -> bag 'a -o[m_b] bag 'b -o[m_a] bag ('a * 'b)",
           "join_private \"ka\" \"kb\" a b: every row of a paired with every row of b whose column kb equals its "
           "column ka (an inner join). Each side must bound its rows per key: truncate a private table first "
           "(truncate k \"ka\" a), or use a public table's declared keys. With at most m_a rows per key in a and "
           "m_b in b, the result is m_b times as far as a plus m_a times as far as b.",
           "A row added to a pairs with at most m_b rows of b, a row added to b with at most m_a rows of a "
           "(both bounds hold for every table of their types: truncated, or declared and verified at load), "
           "and the two moves add up (triangle inequality). A table joined with itself, or with a filtered "
           "copy of itself, moves on both sides at once, so its distance counts twice: with truncate's factor "
           "2, a self-join truncated to k per key on both sides is 4k-stable (docs/soundness.md, rule Table join). "
           + _REF,
           category="join")
def _join_private(ctx, args, span):
    ka, kb, a, b = args
    ea, eb = elem_type(ctx, a, "join_private"), elem_type(ctx, b, "join_private")
    col_a, ta = _column(ctx, ka, ea, a, "join_private")
    col_b, tb = _column(ctx, kb, eb, b, "join_private")
    _same_kind(ctx, ta, tb, col_a, col_b, span, "join_private")
    m_a = _bound(ctx, a, col_a, "join_private", "first")
    m_b = _bound(ctx, b, col_b, "join_private", "second")
    row, shared = _joined_row(ctx, ea, eb, col_a, col_b, span, "join_private")
    dist = d_add(d_scale(Fraction(m_b), a.dist), d_scale(Fraction(m_a), b.dist))
    ctx.note_growth(d_scale(Fraction(m_b), a.dist) if a.dist else d_scale(Fraction(m_a), b.dist))
    bounds = _result_bounds(a, b, m_a, m_b, row)
    why = (f"each row of the first table pairs with the second's rows of its {col_b}, {_why(b, col_b, m_b)}, and "
           f"each row of the second with the first's rows of its {col_a}, {_why(a, col_a, m_a)}: the result moves "
           f"by {m_b} per row of the first table and {m_a} per row of the second (a table on both sides: both)")
    return Result(keyed_bag(row, bounds, _joined(span, bounds)), dist,
                  info=join_info(col_a, col_b, shared, most_left=m_a, most_right=m_b, **{EXPLAINED: why}))


def _same_kind(ctx, ta: Type, tb: Type, col_a: str, col_b: str, span, what: str) -> None:
    if not _comparable(ta, tb):
        raise ctx.fail("E0202", f"{what}: key '{col_a}' is {ta} but key '{col_b}' is {tb}; their values can never "
                       "be equal", span)


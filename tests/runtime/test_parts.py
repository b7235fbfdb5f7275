"""Group-by parts and lazy bags.  Remembered key codes (primitives/partitions.py,
`remembered_key_codes`) are shared between call sites exactly when their key functions are the same
code (`batch.structure`) and are read at a part's own rows; a bag given by its row indices is the
bag given by its mask; `materialise` replaces lazy bags and copies nothing else; the rows of a
table read for no column are its rows.  The parts are always those of the reference path (no
remembered codes, no batching)."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.batch import constant_identity, structure
from fuzzpy.runtime.interpreter import RunState, evaluate_entry
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.values import Closure
from fuzzpy.typesystem import ir as I

SCHEMA = 'schema T { x : num[0, 10], y : num[0, 10], k : cat{"a", "b", "c"} }\n'
DB = pd.DataFrame({"x": [1.0, 7.0, 10.0, 0.0, 4.0, 9.0], "y": [2.0, 2.0, 3.0, 9.0, 5.0, 1.0],
                   "k": pd.Categorical(["a", "b", "a", "c", "a", "b"], ["a", "b", "c"])})
# `by` is generic in f: each use is its own instance, with its own copy of the key function
BY = """function by (b : bag T) f { f (groupby (fun r -> clip 0 2 (bin 4 r.x)) b) }
function byk (b : bag T) f { f (groupby (fun r -> r.k) b) }
"""


def check(main: str, extra: str = BY):
    report = check_source(SCHEMA + extra + main, "t.fz")
    errors = [d for d in report.diagnostics if d.severity == "error" and d.code not in ("E0302", "E0309")]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    return report.entry_instance


def run(entry, batch: bool = True):
    state = RunState(RandomSource.seeded(1), batch=batch)
    out = evaluate_entry(entry, {"db": DB}, state)
    return out.value, [r.value for r in state.releases], state


def key_functions(entry) -> list[Closure]:
    """Every groupby's key function in the program, as the closure its evaluation would build
    (none of them reads its scope)."""
    out = []
    for node in I.reachable(entry):
        if isinstance(node, I.IPrim) and node.name == "groupby":
            key = node.args[0]
            assert isinstance(key, (I.ILambda, I.IApply)), type(key)
            if isinstance(key, I.ILambda):
                out.append(Closure({}, key.params, key.body))
    return out


# ---- which call sites share codes ------------------------------------------------------------------

def test_one_key_in_two_instances_is_computed_once_and_gives_the_reference_parts():
    entry = check("""function main (db : bag T) : fuzzy (num, num) {
      let a = by db (fun ps -> count (part ps "0"));
      let b = by db (fun ps -> (count (part ps "1"), count (part ps "2")));
      laplace 1 (a, (let (u, v) = b; u + v)) }""")
    value, releases, state = run(entry)
    ref_value, ref_releases, _ = run(entry, batch=False)
    assert (value, releases) == (ref_value, ref_releases)
    assert len(state.memo) == 1  # two call sites, one key: one computation


def test_different_keys_are_not_shared():
    # same shape, different column / bin width / clip bound / key set: four computations
    extra = BY + """function byy (b : bag T) f { f (groupby (fun r -> clip 0 2 (bin 4 r.y)) b) }
    function by5 (b : bag T) f { f (groupby (fun r -> clip 0 2 (bin 5 r.x)) b) }
    function by3 (b : bag T) f { f (groupby (fun r -> clip 0 3 (bin 4 r.x)) b) }
    """
    entry = check("""function main (db : bag T) : fuzzy (num, num, num, num) {
      laplace 1 (by db (fun ps -> count (part ps "0")), byy db (fun ps -> count (part ps "0")),
                 by5 db (fun ps -> count (part ps "0")), by3 db (fun ps -> count (part ps "0"))) }""", extra)
    value, releases, state = run(entry)
    assert (value, releases) == run(entry, batch=False)[:2]
    assert len(state.memo) == 4


def test_structure_is_equal_up_to_bound_names_only():
    entry = check("""function main (db : bag T) : fuzzy (num, num) {
      laplace 1 (by db (fun ps -> count (part ps "0")), by db (fun ps -> count (part ps "1"))) }""")
    keys = key_functions(entry)
    assert len(keys) >= 2 and len({id(k.body) for k in keys}) >= 2  # two copies of the code
    assert len({constant_identity(k) for k in keys}) == 1
    # bound names do not matter, free ones do (they are read from the scope by name)
    x, y, z = I.IVar("x"), I.IVar("y"), I.IVar("z")
    minus = lambda a, b: I.IPrim("-", [a, b])  # noqa: E731
    assert structure(minus(x, z), ("x",)) == structure(minus(y, z), ("y",))
    assert structure(minus(x, y), ("x",)) != structure(minus(y, x), ("y",))  # free y, free x
    assert structure(minus(x, y), ()) != structure(minus(y, x), ())
    assert structure(minus(x, y), ("x", "y")) != structure(minus(y, x), ("x", "y"))
    lets = [I.ILet(n, I.IConst(F(1)), minus(I.IVar(n), x)) for n in ("a", "b")]
    assert structure(lets[0], ("x",)) == structure(lets[1], ("x",))
    shadow = I.ILet("x", I.IConst(F(1)), minus(x, x))  # the inner x is bound, not the parameter
    assert structure(shadow, ("x",)) != structure(I.ILet("z", I.IConst(F(1)), minus(x, x)), ("x",))
    # constants by type and value, primitives by their decisions
    assert structure(I.IConst(F(1))) != structure(I.IConst(1)) != structure(I.IConst(1.0))
    assert structure(I.IPrim("clip", [x], {"lo": F(0)})) != structure(I.IPrim("clip", [x], {"lo": F(1)}))


def test_a_closure_reading_its_scope_is_told_apart_by_the_values_it_reads():
    body = I.IPrim("+", [I.IField(I.IVar("r"), "x"), I.IVar("c")])
    one, two = Closure({"c": F(1)}, ["r"], body), Closure({"c": F(2)}, ["r"], body)
    assert constant_identity(one) != constant_identity(two)
    assert constant_identity(one) == constant_identity(Closure({"c": F(1)}, ["s"], I.IPrim(
        "+", [I.IField(I.IVar("s"), "x"), I.IVar("c")])))
    assert constant_identity(Closure({"c": 1.0}, ["r"], body)) != constant_identity(one)  # types too


def _recursive(name, n_params=1, step=I.IConst(F(1))):
    """fun n -> if n == 0 then 0 else step + name (n - 1), as its own recursive instance."""
    inst = I.Instance(name, ["n"] + [f"p{j}" for j in range(1, n_params)])
    n = I.IVar("n")
    rest = [I.IVar(f"p{j}") for j in range(1, n_params)]
    inst.body = I.IIf(I.IPrim("eq", [n, I.IConst(F(0))]), I.IConst(F(0)),
                      I.IPrim("add", [step, I.ICall(inst, [I.IPrim("sub", [n, I.IConst(F(1))])] + rest)]))
    return inst


def test_recursive_code_is_described_as_a_fixpoint():
    one, two = _recursive("count_down"), _recursive("other_name")
    call = lambda inst: I.ICall(inst, [I.IConst(F(3))])  # noqa: E731
    assert structure(call(one)) is not None
    assert structure(call(one)) == structure(call(two))  # the same equations
    assert structure(call(one)) != structure(call(_recursive("x", step=I.IConst(F(2)))))
    two_params = I.ICall(_recursive("x", n_params=2), [I.IConst(F(3)), I.IConst(F(0))])
    assert structure(two_params) is not None and structure(call(one)) != structure(two_params)
    # the recursive call's target matters: a function calling the recursive one, not itself
    outer = I.Instance("outer", ["n"])
    outer.body = I.IIf(I.IPrim("eq", [I.IVar("n"), I.IConst(F(0))]), I.IConst(F(0)),
                       I.IPrim("add", [I.IConst(F(1)), I.ICall(one, [I.IPrim("sub", [I.IVar("n"), I.IConst(F(1))])])]))
    assert structure(call(outer)) != structure(call(one))
    # mutual recursion: even calls odd calls even
    even, odd = I.Instance("even", ["n"]), I.Instance("odd", ["n"])
    for f, g, base in ((even, odd, True), (odd, even, False)):
        f.body = I.IIf(I.IPrim("eq", [I.IVar("n"), I.IConst(F(0))]), I.IConst(base),
                       I.ICall(g, [I.IPrim("sub", [I.IVar("n"), I.IConst(F(1))])]))
    assert structure(call(even)) is not None and structure(call(even)) != structure(call(odd))
    # which enclosing function a recursive call goes back to: f -> g -> f is not f -> g -> g
    def pair(back_to_f):
        f, g = I.Instance("f", ["n"]), I.Instance("g", ["n"])
        for inst, target in ((f, g), (g, f if back_to_f else g)):
            inst.body = I.IIf(I.IPrim("eq", [I.IVar("n"), I.IConst(F(0))]), I.IConst(F(0)),
                              I.ICall(target, [I.IPrim("sub", [I.IVar("n"), I.IConst(F(1))])]))
        return call(f)
    assert structure(pair(True)) == structure(pair(True)) != structure(pair(False))
    k1 = Closure({}, ["r"], I.ICall(one, [I.IVar("r")]))
    assert constant_identity(k1) == constant_identity(Closure({}, ["s"], I.ICall(two, [I.IVar("s")])))


def test_code_it_cannot_describe_is_only_the_same_as_itself():
    elsewhere = I.IApply(I.IVar("f"), [I.IVar("r")], ["r"], I.IVar("z"))  # body runs in f's scope
    assert structure(elsewhere, ("r",)) is None
    k1 = Closure({}, ["r"], elsewhere)
    assert constant_identity(k1) != constant_identity(Closure({}, ["r"], I.IApply(
        I.IVar("f"), [I.IVar("r")], ["r"], I.IVar("z"))))
    assert constant_identity(k1) == constant_identity(k1)


# ---- a part's groupby reads its own rows --------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_grouping_parts_by_remembered_codes_gives_the_reference_parts(seed):
    rng = np.random.default_rng(seed)
    n = 300
    db = pd.DataFrame({"x": rng.uniform(0, 10, n).round(1), "y": rng.uniform(0, 10, n).round(1),
                       "k": pd.Categorical(rng.choice(["a", "b", "c"], n), ["a", "b", "c"])})
    # the parts of one groupby grouped again by another key (a tree's next level), with empty parts
    # the inner parts are counted, filtered (rows of rows), and have a column summed (their mask)
    entry = check("""function main (db : bag T) : fuzzy (parts {"a", "b", "c"} (parts {"0", "1", "2"} (num, num, num))) {
      byk (filter (fun r -> r.y < 7) db) (fun ps ->
        each (fun g -> by g (fun qs -> each (fun h -> laplace 1 (count h, count (filter (fun r -> r.y > 3) h),
                                                              sum (map (fun r -> clip 0 10 r.y) h))) qs)) ps) }""")
    outs = []
    for batch in (True, False):
        state = RunState(RandomSource.seeded(seed), batch=batch)
        res = evaluate_entry(entry, {"db": db}, state)
        outs.append((res.value, [r.value for r in state.releases]))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("seed", range(4))
def test_pmap_over_the_parts_of_a_part_gives_the_reference_values(seed, monkeypatch):
    import fuzzpy.runtime.batch as B

    rng = np.random.default_rng(seed)
    n = 200
    x = rng.uniform(0, 10, n).round(1)
    x[rng.random(n) < 0.1] = np.nan  # rows in no part of `bin 3 r.x`
    db = pd.DataFrame({"x": x, "y": rng.uniform(0, 10, n).round(1),
                       "k": pd.Categorical(rng.choice(["a", "b", "c"], n), ["a", "b", "c"])})
    entry = check("""function main (db : bag T) : fuzzy (parts {"a", "b", "c"} (parts {"0", "1", "2", "3"} num)) {
      byk (filter (fun r -> r.y < 8) db) (fun ps ->
        each (fun g -> each (fun c -> laplace 1 c)
                              (pmap (fun h -> count h * 2 + count (filter (fun r -> r.y > 4) h))
                                    (groupby (fun r -> bin 3 r.x) g))) ps) }""")
    batched = []
    real = B.batched_pmap
    def spy(*a):
        out = real(*a)
        batched.append(out is not None)
        return out

    monkeypatch.setattr(B, "batched_pmap", spy)
    outs = []
    for batch in (True, False):
        state = RunState(RandomSource.seeded(seed), batch=batch)
        res = evaluate_entry(entry, {"db": db}, state)
        outs.append((res.value, [r.value for r in state.releases]))
        if batch:
            assert len(batched) == 3 and all(batched)  # every pmap ran batched
    assert outs[0] == outs[1]


def test_a_bag_given_by_its_rows_is_the_bag_given_by_its_mask():
    from fuzzpy.runtime.values import MaskedBag, restrict

    rng = np.random.default_rng(5)
    base = DB.sample(n=60, replace=True, random_state=1).reset_index(drop=True)
    mask = rng.random(len(base)) < 0.4
    rows = np.flatnonzero(mask)
    for one in (MaskedBag(base, rows=rows), MaskedBag(base, rows_fn=lambda: rows)):
        other = MaskedBag(base, mask)
        assert len(one) == len(other) == len(rows)
        assert one.mask.tolist() == mask.tolist() and other.rows.tolist() == rows.tolist()
        assert one.column("x").tolist() == other.column("x").tolist()
        assert one.column("k").dtype == other.column("k").dtype  # categoricals stay categorical
        pd.testing.assert_frame_equal(one.materialise(), other.materialise())
        keep = rng.random(len(rows)) < 0.5
        a, b = restrict(one, keep), restrict(MaskedBag(base, mask), keep)
        assert a.rows.tolist() == b.rows.tolist() == rows[keep].tolist() and len(a) == int(keep.sum())
    with pytest.raises(AssertionError):
        MaskedBag(base, mask, rows=rows)  # one description only


def test_materialise_replaces_lazy_bags_at_any_depth_and_copies_nothing_else():
    from fuzzpy.runtime.values import MaskedBag, Partition, materialise

    bag = MaskedBag(DB, rows=np.array([1, 3]))
    rules = tuple(((("a", str(i)), ("b", "x")), "<=50K") for i in range(50))
    assert materialise(rules) is rules  # a long list of results: the same object, not a copy
    numbers = {"a": (1, (2, 3)), "b": ()}
    assert materialise(numbers) is numbers
    out = materialise((1, {"k": (bag, 2)}, rules))
    assert out[2] is rules and out[0] == 1 and out[1]["k"][1] == 2
    pd.testing.assert_frame_equal(out[1]["k"][0], DB.iloc[[1, 3]].reset_index(drop=True))
    parts = Partition({"a": bag}, DB, np.array([-1, 0, -1, 0, -1, -1]))
    plain = materialise(parts)
    assert type(plain) is dict and isinstance(plain["a"], pd.DataFrame) and isinstance(parts["a"], MaskedBag)


def test_the_rows_of_a_table_read_for_no_column_are_its_rows():
    # a run that reads no column loads a table of no columns; row by row, each row is an empty
    # record (pandas 2's to_dict("records") gives none at all)
    from fuzzpy.runtime.values import MaskedBag, bag_rows

    empty = pd.DataFrame(index=range(5))
    assert bag_rows(empty) == [{}] * 5
    assert bag_rows(MaskedBag(empty, rows=np.array([1, 3]))) == [{}, {}]


def test_values_hands_the_parts_on_unmaterialised_and_they_count_the_same(monkeypatch):
    from fuzzpy.runtime.values import MaskedBag

    extra = BY + """function counts (xs : list (bag T)) : list num {
      case xs of { [] => [] | h :: t => count (filter (fun r -> r.y > 2) h) :: counts t } }
    """
    entry = check("""function main (db : bag T) : fuzzy (list num) {
      byk db (fun ps -> return (counts (values ps))) }""", extra)
    seen = []
    real = MaskedBag.materialise
    monkeypatch.setattr(MaskedBag, "materialise", lambda self: seen.append(1) or real(self))
    lazy = run(entry)
    assert seen == [] and lazy[0] == (2, 0, 1)  # rows with y > 2 per key a, b, c
    assert lazy[:2] == run(entry, batch=False)[:2]


@pytest.mark.parametrize("of_a_part", [False, True])
def test_parts_are_counted_once_and_only_when_a_size_is_asked_for(monkeypatch, of_a_part):
    """A whole table's parts, and the parts of a part (a tree's node) alike."""
    import fuzzpy.runtime.kernels.partitions as P
    from fuzzpy.runtime.evaluator import Interpreter
    from fuzzpy.runtime.kernels.partitions import _groupby as _run_groupby
    from fuzzpy.runtime.state import Context
    from fuzzpy.runtime.values import MaskedBag

    entry = check('function main (db : bag T) : fuzzy num { byk db (fun ps -> laplace 1 (count (part ps "a"))) }')
    groupby = next(n for n in I.reachable(entry) if isinstance(n, I.IPrim) and n.name == "groupby")
    key = groupby.args[0]
    calls = []
    name = "_own_counts" if of_a_part else "group_counts"
    real = getattr(P, name)
    monkeypatch.setattr(P, name, lambda *a: calls.append(1) or real(*a))
    ctx = Context(Interpreter(RunState(RandomSource.seeded(0))), groupby.info, None)
    bag = MaskedBag(DB, rows=np.array([0, 1, 2, 4, 5])) if of_a_part else DB  # without row 3 ("c")
    parts = _run_groupby(ctx, Closure({}, key.params, key.body), bag)
    sizes = [3, 2, 0] if of_a_part else [3, 2, 1]
    assert calls == []  # nothing counted yet
    assert [len(p) for p in parts.values()] == sizes and calls == [1]  # all at once, once
    assert [len(p.materialise()) for p in parts.values()] == sizes


@pytest.mark.parametrize("k", [1, 3, 40, 2**15 + 3])
def test_a_parts_rows_are_its_rows_in_order_whichever_part_is_asked_first(k):
    """_Grouped.part_rows: the first part asked by one comparison, the others from one stable sort
    of the codes; each part's rows ascending, rows in no part (-1) in none; rows given, or read
    from the bag and the remembered codes when first asked for."""
    from fuzzpy.runtime.kernels.partitions import _Grouped
    from fuzzpy.runtime.values import MaskedBag

    rng = np.random.default_rng(k)
    rows = np.sort(rng.choice(10_000, 3_000, replace=False))
    codes = rng.integers(-1, min(k, 50), len(rows)) if k < 2**15 else rng.integers(-1, k, len(rows))
    small = codes.astype(np.int8 if k < 100 else np.int64)
    full = np.full(10_000, 99, dtype=small.dtype)
    full[rows] = small
    for first in (0, k - 1):
        for parts in (_Grouped(None, None, k, False, rows, small), _Grouped(MaskedBag(DB, rows=rows), full, k, False)):
            order = [first] + [i for i in range(k) if i != first]
            got = {i: parts.part_rows(i) for i in order[:60] + order[-5:]}
            for i, r in got.items():
                assert np.array_equal(r, rows[codes == i])
            assert parts.sorted is not None or k == 1
        whole = _Grouped(None, small, k, False)  # every row of a table: row j is j
        for i in ([first] + [i for i in range(k) if i != first])[:5]:
            assert np.array_equal(whole.part_rows(i), np.flatnonzero(codes == i))


@pytest.mark.parametrize("seed", range(5))
def test_sibling_cells_are_each_parts_own_group_counts(seed):
    """_Grouped.cells: one pass giving, for every part, the counts of grouping that part by
    another key: rows in no part, or with no value of the other key (-1), counted in no cell;
    `complete` (no -1 on either side) skips that test and counts the same.  Cells in int16 when
    they fit, in intp beyond (seed 4: 2^15 cells and more)."""
    from fuzzpy.runtime.kernels.partitions import _Grouped, _own_counts
    from fuzzpy.runtime.values import MaskedBag

    rng = np.random.default_rng(seed)
    n, m, k2 = 5_000, int(rng.integers(1, 30)), int(rng.integers(1, 9))
    if seed == 4:
        m, k2 = 300, 110
    rows = np.sort(rng.choice(n, 2_000, replace=False))
    full = rng.integers(-1, m, n).astype(np.int16)
    other = rng.integers(-1, k2, n).astype(np.int8)
    for g in (_Grouped(MaskedBag(DB, rows=rows), full, m, False), _Grouped(None, full, m, False)):
        mine_rows = np.arange(n) if g.rows() is None else g.rows()
        got = g.cells(other, k2, False)
        assert got.shape == (m, k2) and got is g.cells(other, k2, False)  # counted once
        for j in range(m):
            part = mine_rows[full[mine_rows] == j]
            assert np.array_equal(got[j], _own_counts(other[part], k2))
    complete = _Grouped(None, np.maximum(full, 0), m, True)
    positive = np.maximum(other, 0)
    want = _Grouped(None, np.maximum(full, 0), m, False).cells(positive, k2, False)
    assert np.array_equal(complete.cells(positive, k2, True), want)


def test_the_parts_of_a_part_are_counted_from_their_siblings_and_read_no_rows(monkeypatch):
    """A part of a partition grouped by a remembered key (a tree's leaf) groups and counts its
    rows without reading them: the sizes of its parts come from one pass over its siblings'
    rows (`_Grouped.cells`), no part's rows are selected, and the partition's codes and rows,
    read later, are the part's own.  The releases are the reference path's."""
    import fuzzpy.runtime.kernels.partitions as P

    entry = check("""function leaf (g : bag T) : fuzzy (num, num) {
        laplace 1 (count (part (byk g (fun ps -> ps)) "a"), count (part (byk g (fun ps -> ps)) "b")) }
      function main (db : bag T) : fuzzy (parts {"0", "1", "2"} (num, num)) { by db (fun ps -> each leaf ps) }""")
    asked, cells = [], []
    real_rows, real_cells = P._Grouped.part_rows, P._Grouped.cells
    monkeypatch.setattr(P._Grouped, "part_rows", lambda self, i: asked.append(i) or real_rows(self, i))
    monkeypatch.setattr(P._Grouped, "cells", lambda self, *a: cells.append(1) or real_cells(self, *a))
    batched = run(entry)
    assert asked == [] and cells == [1] * 6  # each partition's sizes from the cells, no rows selected
    assert batched[:2] == run(entry, batch=False)[:2]
    # a part's partition directly: sized before anything of the part is read; its codes and rows,
    # read when asked for, are the part's own
    from fuzzpy.runtime.evaluator import Interpreter
    from fuzzpy.runtime.state import Context

    def grouping(column):
        node = next(n for n in I.reachable(entry) if isinstance(n, I.IPrim) and n.name == "groupby"
                    and f"'{column}'" in repr(n.args[0].body))
        ctx = Context(Interpreter(RunState(RandomSource.seeded(0))), node.info, None)
        return ctx, Closure({}, node.args[0].params, node.args[0].body)

    (ctx_x, key_x), (ctx_k, key_k) = grouping("x"), grouping("k")
    outer = P._groupby(ctx_x, key_x, DB)  # bins of x: 0, 1, 2, 0, 1, 2
    part = outer["1"]  # rows 1 and 4: k = "b", "a"
    inner = P._groupby(ctx_k, key_k, part)
    assert [len(p) for p in inner.values()] == [1, 1, 0]
    assert inner._grouped is not None and part._rows is None  # sized without reading the part
    assert np.array_equal(inner.rows, [1, 4]) and np.array_equal(inner.codes, [1, 0])
    sibling = P._groupby(ctx_k, key_k, outer["2"])  # rows 2 and 5: k = "a", "b"
    assert [len(p) for p in sibling.values()] == [1, 1, 0]
    family = part.family[0]
    assert family is outer["2"].family[0] and len(family._cells) == 1  # one pass for both parts


def test_a_lazy_part_is_the_bag_the_constructor_makes():
    """MaskedBag.part skips the constructor's keyword handling: every slot as __init__ sets it."""
    from fuzzpy.runtime.values import MaskedBag

    rows_fn, mask_fn, count_fn = (lambda: np.array([0, 2])), (lambda: np.array([True, False] * 3)), (lambda: 2)
    for kw in ({"rows_fn": rows_fn, "count_fn": count_fn}, {"mask_fn": mask_fn, "count_fn": count_fn}, {"rows_fn": rows_fn}):
        made, part = MaskedBag(DB, **kw), MaskedBag.part(DB, **kw)
        assert all(getattr(made, slot) is getattr(part, slot) or getattr(made, slot) == getattr(part, slot)
                   for slot in MaskedBag.__slots__)
        assert len(made) == len(part) and np.array_equal(made.rows, part.rows)


def test_a_lazy_partition_reads_as_the_dict_of_its_parts():
    """Partition.lazy: keys, size, membership and iteration without making the parts; every
    other reading of a dict (a part, values, items, get, comparisons, copies, `**`, repr,
    mutation) makes them all once, in key order, and sees exactly the dict of them."""
    import copy

    from fuzzpy.runtime.values import Partition

    keys = ("a", "b", "c")
    readings = [
        lambda p: p["b"], lambda p: list(p.values()), lambda p: list(p.items()), lambda p: p.get("c"),
        lambda p: list(p.keys()), lambda p: p == dict(zip(keys, "xyz")), lambda p: p != {}, lambda p: dict(p),
        lambda p: {**p}, lambda p: (lambda **kw: kw)(**p), lambda p: repr(p), lambda p: copy.copy(p),
        lambda p: list(reversed(p)), lambda p: p | {}, lambda p: {} | p, lambda p: p.copy(),
        lambda p: p.setdefault("a"), lambda p: p.pop("a"), lambda p: p.update({}),
    ]
    for read in readings:
        made = []
        p = Partition.lazy(keys, lambda i: made.append(i) or "xyz"[i], None, np.array([0, 1, 2]))
        assert len(p) == 3 and list(p) == list(keys) and "b" in p and "d" not in p and bool(p)
        assert list(zip(p, range(3))) == [("a", 0), ("b", 1), ("c", 2)] and made == []
        want = read(dict(zip(keys, "xyz")))
        assert read(p) == want and made == [0, 1, 2]
        p.get("b"), list(p.values())
        assert made == [0, 1, 2]  # made once
    empty = Partition.lazy((), lambda i: 1 / 0, None, np.array([], dtype=np.int64))
    assert len(empty) == 0 and not empty and dict(empty) == {} and empty == {}


def test_a_scores_candidate_partitions_are_read_through_their_codes(monkeypatch):
    """A score whose partitions only go to a batched pmap never makes their parts; the leaf's
    partition, whose parts are read, makes them; the values are the unbatched run's."""
    from fuzzpy.runtime.values import Partition

    entry = check("""function quality ps { values (pmap (fun g -> count g) ps) }
    function total (xs : list num) : num { case xs of { [] => 0 | h :: t => h + total t } }
    function main (db : bag T) : fuzzy (string, num) {
      sample a = exponential 1 ["x", "k"] (fun c -> if c == "x" then total (by db quality) else total (byk db quality));
      sample n = laplace 1 (count (part (byk db (fun ps -> ps)) "a"));
      return (a, n) }""")
    made = []
    real = Partition.lazy.__func__

    def spy(cls, keys, make, *rest, **kw):
        return real(cls, keys, lambda i: made.append(keys) or make(i), *rest, **kw)

    monkeypatch.setattr(Partition, "lazy", classmethod(spy))
    batched = run(entry)
    assert made == [("a", "b", "c")] * 3  # the three parts of the last partition only
    assert batched[:2] == run(entry, batch=False)[:2]


@pytest.mark.parametrize("seed", range(3))
def test_partitions_with_and_without_rows_in_no_part_flatten_to_the_reference(seed, monkeypatch):
    """A score's candidate partitions flattened into one lane bag: a key that leaves rows in no
    part (NaN: no bin) and one that puts every row in a part (`complete`, no test for -1), at the
    table and at a part; the scores and releases are the unbatched run's."""
    from fuzzpy.runtime.values import Partition

    rng = np.random.default_rng(seed)
    n = 240
    x = rng.uniform(0, 10, n).round(1)
    x[rng.random(n) < 0.15] = np.nan
    db = pd.DataFrame({"x": x, "y": rng.uniform(0, 10, n).round(1),
                       "k": pd.Categorical(rng.choice(["a", "b", "c"], n), ["a", "b", "c"])})
    entry = check("""function total (xs : list num) : num { case xs of { [] => 0 | h :: t => h + total t } }
    function quality ps { total (values (pmap (fun g -> count g * 3 + count (filter (fun r -> r.y > 5) g)) ps)) }
    function score (b : bag T) (c : string) : num {
      if c == "x" then quality (groupby (fun r -> bin 3 r.x) b)
      else if c == "k" then quality (groupby (fun r -> r.k) b)
      else quality (groupby (fun r -> clip 0 2 (bin 4 r.y)) b) }
    function main (db : bag T) : fuzzy (string, string) {
      sample a = exponential 1 ["x", "k", "y"] (fun c -> score db c);
      sample b = exponential 1 ["k", "x", "y"] (fun c -> score (filter (fun r -> r.y < 8) db) c);
      return (a, b) }""")
    flags = []
    real = Partition.lazy.__func__
    monkeypatch.setattr(Partition, "lazy", classmethod(
        lambda cls, keys, make, *rest, **kw: flags.append(kw.get("complete")) or real(cls, keys, make, *rest, **kw)))
    import fuzzpy.runtime.kernels.partitions as KP
    import fuzzpy.runtime.noise as N

    flattened = []
    real_flat = KP._lanes_of_partitions
    monkeypatch.setattr(KP, "_lanes_of_partitions", lambda ps: flattened.append(len(ps) == 3) or real_flat(ps))
    scores = []
    real_select = N.exponential_mechanism
    monkeypatch.setattr(N, "exponential_mechanism", lambda s, *a: scores.append(list(s)) or real_select(s, *a))
    outs = []
    for batch in (True, False):
        scores.clear()
        state = RunState(RandomSource.seeded(seed), batch=batch)
        res = evaluate_entry(entry, {"db": db}, state)
        outs.append((res.value, [r.value for r in state.releases], [[(type(q), q) for q in s] for s in scores]))
    assert outs[0] == outs[1] and len(outs[0][2]) == 2
    assert True in flags and False in flags  # both kinds of partition were made
    assert flattened and all(flattened)


def test_materialise_scans_deep_public_values_without_copying_them():
    """A long, deep value of public results (a tree's rules) holds no lazy bag: materialise
    returns the very object; one lazy bag deep inside is replaced, everything else kept."""
    from fuzzpy.runtime.values import MaskedBag, materialise

    rules = tuple(((("age", str(i)), ("sex", "Male")), ">50K" if i % 2 else "<=50K") for i in range(500))
    deep = ((F(1), (2.5, ("x", {"k": (True, None)}))), rules)
    assert materialise(rules) is rules and materialise(deep) is deep
    bag = MaskedBag(DB, rows=np.array([1, 3]))
    holder = (rules, ({"a": (1, bag)},))
    out = materialise(holder)
    assert out[0] is rules and isinstance(out[1][0]["a"][1], pd.DataFrame) and len(out[1][0]["a"][1]) == 2


def test_int_codes_are_each_keys_position_and_small():
    """int_codes: rint(x) - lo when that is in 0 .. k - 1, else -1 (NaN, infinities, values
    outside, huge values that would wrap in a cast), in the smallest integer type for k."""
    import math

    import numpy as np

    from fuzzpy.runtime.kernels.partitions import int_codes

    def reference(x, lo, k):
        if not math.isfinite(x):
            return -1
        c = round(x) - lo  # Python's round is half-to-even, as np.rint
        return c if 0 <= c < k else -1

    rng = np.random.default_rng(11)
    for k, want_type in [(1, np.int8), (20, np.int8), (127, np.int8), (128, np.int16), (40000, np.int64)]:
        for lo in (-3, 0, 17):
            x = rng.uniform(lo - 5, lo + k + 5, 200)
            x[::9] = np.nan
            x[1::17] = np.inf
            x[2::19] = -np.inf
            x[3::7] = np.floor(x[3::7]) + 0.5  # ties
            x[4::23] = 1e300
            got = int_codes(x, lo, k)
            assert got.dtype == want_type
            assert got.tolist() == [reference(v, lo, k) for v in x.tolist()]
    assert int_codes(4.0, 1, 5).tolist() == [3] and int_codes(float("nan"), 0, 5).tolist() == [-1]


def test_a_sparse_bag_takes_its_columns_by_index_with_the_same_values_and_dtypes():
    """A bag keeping under an eighth of its base (a Poisson batch) takes its columns by row
    index; a dense one by its mask: the same values, dtypes (categoricals stay categorical,
    missing values stay missing) and a fresh RangeIndex either way."""
    from fuzzpy.runtime.values import MaskedBag

    rng = np.random.default_rng(3)
    n = 4000
    base = pd.DataFrame({"x": rng.normal(size=n), "k": pd.Categorical(rng.choice(["a", "b"], n)),
                         "s": pd.array(np.where(rng.random(n) < 0.1, None, "t"), dtype="string")})
    for share in (0.02, 0.5):
        mask = rng.random(n) < share
        bag = MaskedBag(base, mask)
        assert bag._few_rows() == (share < 1 / 8)
        for label in base.columns:
            col = bag.column(label)
            expected = base[label][mask].reset_index(drop=True)
            pd.testing.assert_series_equal(col, expected, check_names=True)

"""Output encoding and candidate events."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from fuzzpy.audit.events import (
    CellEvent,
    IntervalEvent,
    ProjectionEvent,
    ThresholdEvent,
    counts,
    lattice_codes,
    lattice_text,
    propose,
    rank,
)
from fuzzpy.audit.outputs import concat, encode, stable_key


def test_numeric_arrays_encode_exactly():
    enc = encode(np.array([[1.0, 2.0], [1.0, 2.0], [1.0, -0.0], [1.0, 0.0]]))
    assert enc.n == 4 and list(enc.numeric) == ["y[0]", "y[1]"]
    assert enc.keys[0] == enc.keys[1] != enc.keys[2]
    assert enc.keys[2] == enc.keys[3]  # -0.0 and 0.0 are one output
    np.testing.assert_array_equal(enc.coordinate("y[1]"), [2.0, 2.0, 0.0, 0.0])


def test_released_values_encode_by_structure():
    outs = [{"a": 1.5, "b": -2.0}, (True, False), "b", {"a": 1.5, "b": -2.0}, 3]
    enc = encode(outs, keep_raw=True)
    assert enc.keys[0] == enc.keys[3] and len(set(enc.keys.tolist())) == 4
    assert enc.coordinate("y.a")[0] == 1.5 and math.isnan(enc.coordinate("y.a")[1])
    assert enc.coordinate("y[0]")[1] == 1.0  # booleans are 0/1 coordinates
    assert enc.label_of(int(enc.keys[1])) == "(true, false)"
    assert enc.label_of(int(enc.keys[2])) == '"b"'
    assert stable_key(3) == stable_key(3.0)  # one text per number
    both = concat([enc, encode([(False, False)])])
    assert both.n == 6 and math.isnan(both.coordinate("y.a")[5]) and both.coordinate("y[1]")[1] == 0.0


def test_lattice_codes_tell_naive_laplace_apart():
    # 1 + L lands on multiples of 2^-53 in (0, 1/2); L alone is an arbitrary double there.
    rng = np.random.default_rng(0)
    a = rng.laplace(0, 2, 200_000)
    b = 1 + rng.laplace(0, 2, 200_000)
    def odd(y):
        return (lattice_codes(y) % 16 == 0) & (y > 0) & (y < 0.5)   # tz = 0: an odd multiple of the ulp
    assert odd(b).sum() == 0
    assert 0.05 < odd(a).mean() < 0.07  # about half of P(0 < L < 1/2) = 0.5 (1 - e^-0.25) / 2
    assert lattice_text(int(lattice_codes(np.array([0.3]))[0])) == "[0.25, 0.5), an odd multiple of the ulp"
    assert lattice_text(int(lattice_codes(np.array([-1.5]))[0])) == "-[1, 2), a multiple of 2^8 ulps"
    specials = lattice_codes(np.array([0.0, np.nan, np.inf, -np.inf]))
    assert [lattice_text(int(c)) for c in specials] == ["0", "nan", "inf", "-inf"]


def test_threshold_and_interval_events():
    enc = encode(np.array([-1.0, 0.0, 0.5, 2.0, np.nan]))
    assert ThresholdEvent("", "y", 0.0, True).contains(enc).tolist() == [False, False, True, True, False]
    assert ThresholdEvent("", "y", 0.0, False).contains(enc).tolist() == [True, True, False, False, False]
    assert IntervalEvent("", "y", 0.0, 2.0).contains(enc).tolist() == [False, False, True, True, False]
    assert ThresholdEvent("", "nope", 0.0, True).contains(enc).sum() == 0


def test_the_support_cell_of_a_discrete_mechanism_ranks_first():
    # Outputs 0/1/2; output 2 is possible only under A.
    rng = np.random.default_rng(1)
    a = rng.choice([0, 1, 2], size=4000, p=[0.5, 0.3, 0.2])
    b = rng.choice([0, 1, 2], size=4000, p=[0.6, 0.4, 0.0])
    pa, sa = encode(a[:2000].astype(float), True), encode(a[2000:].astype(float))
    pb, sb = encode(b[:2000].astype(float), True), encode(b[2000:].astype(float))
    events = propose(pa, pb)
    top = rank(events, sa, sb, fresh=10_000, alpha=0.001, top=3)
    best = top[0]
    assert best.direction == 1 and best.k2 == 0 and 350 < best.k1 < 450
    assert best.event.contains(encode(np.array([0.0, 1.0, 2.0]))).tolist() == [False, False, True]
    # The ranking counts on the second half only.
    assert counts([best.event], sa)[0] == best.k1


def test_events_are_proposed_for_every_coordinate_and_family():
    rng = np.random.default_rng(2)
    a = encode(rng.laplace(0, 2, (1000, 2)), True)
    b = encode(rng.laplace(0, 2, (1000, 2)) + [1, 0], True)
    events = propose(a, b)
    coords = {getattr(e, "coord", None) for e in events}
    assert {"y[0]", "y[1]"} <= coords
    kinds = {type(e) for e in events}
    # continuous: no value cells; two coordinates: projections too
    assert kinds == {CellEvent, ThresholdEvent, IntervalEvent, ProjectionEvent}
    assert not any(isinstance(e, CellEvent) and e.family == "value" for e in events)


def test_cell_counts_are_the_outputs_in_each_events_cells():
    """`counts` sums each cell event's cells' multiplicities: the same as testing every output's
    cell for membership, for value and lattice cells, codes absent from the sample, no codes."""
    rng = np.random.default_rng(4)
    y = np.round(rng.laplace(0, 3, 2000), 1)
    y[::97] = np.inf
    enc = encode(y)
    lattice = lattice_codes(y)
    events = []
    for family, codes in (("value", enc.keys), ("lattice", lattice)):
        pool = np.unique(np.concatenate([codes, codes.max() + 1 + np.arange(5), codes.min() - 1 - np.arange(5)]))
        for size in (0, 1, 2, 7, 40, len(pool)):
            chosen = rng.choice(pool, size=size, replace=False)
            events.append(CellEvent("e", family, "y" if family == "lattice" else None, chosen))
    direct = [int(np.isin(lattice if e.family == "lattice" else enc.keys, e.codes).sum()) for e in events]
    assert counts(events, enc).tolist() == direct
    assert max(direct) == 2000 and min(direct) == 0


def _slow(values):
    """The general encoding, output by output: keys from the canonical text, numbers one by one."""
    from fuzzpy.audit.outputs import Encoded, _numbers, stable_key

    n = len(values)
    columns: dict = {}
    for i, v in enumerate(values):
        for label, x in _numbers(v, "y"):
            columns.setdefault(label, np.full(n, np.nan))[i] = x
    return Encoded(n, np.array([stable_key(v) for v in values], dtype=np.int64), columns)


def _classes(keys) -> list:
    """Which outputs share a key: the partition the cells see."""
    first: dict = {}
    return [first.setdefault(int(k), i) for i, k in enumerate(keys)]


def test_outputs_of_one_float_shape_encode_as_rows_with_the_same_cells_and_coordinates():
    from fuzzpy.audit import outputs

    rng = np.random.default_rng(2)
    x = np.round(rng.normal(0, 2, (300, 4)), 1)
    x[::7, 1] = -0.0
    x[::9, 2] = 0.0
    x[::11, 3] = np.nan
    shapes = {
        "tuple": [tuple(r) for r in x.tolist()],
        "pairs": [((r[0], r[1]), (r[2], r[3])) for r in x.tolist()],
        "dict": [{"a": r[0], "b": r[1], "c": r[2]} for r in x.tolist()],
    }
    shapes["tuple"] += shapes["tuple"][:50]  # repeated outputs: one cell
    other_nan = np.array([0x7FF8000000000123], dtype=np.int64).view(np.float64)[0].item()  # another NaN
    shapes["tuple"] += [(0.0, 1.0, 2.0, 3.0), (-0.0, 1.0, 2.0, 3.0), (float("nan"), 1.0), (other_nan, 1.0)][:2]
    nan = float("nan")
    shapes["pairs"] += [((nan, 1.0), (2.0, 3.0)), ((other_nan, 1.0), (2.0, -0.0)), ((nan, 1.0), (2.0, 0.0))]
    # exact rationals (a program's post-processed releases), alone or beside floats: a coordinate
    # each (their nearest float), and a cell per exact value (not per float)
    third = Fraction(1, 3)
    shapes["exact"] = [tuple(Fraction(round(v * 8), 8) if v == v else 0.5 for v in r) for r in x.tolist()]
    shapes["exact"] += [(third, 1.0, 2.0, 3.0), (third + Fraction(1, 10**30), 1.0, 2.0, 3.0),
                        (Fraction(1), 1.0, 2.0, 3.0), (1.0, 1.0, 2.0, 3.0), (third, 1.0, 2.0, 3.0)]
    shapes["huge"] = [(Fraction(10**400), 1.0), (Fraction(-10**400, 3), 2.0), (Fraction(2**70, 3), 1.0),
                      (Fraction(2**70, 3), 1.0), (Fraction(-2), 1.0), (Fraction(-1), 1.0)]
    shapes["centres"] = [((Fraction(int(r[0] * 4), 3), r[1]), (r[2], Fraction(1, 7)))
                         for r in np.nan_to_num(x).tolist()]
    shapes["ints beside floats"] = [(float(r[0]), int(r[1] * 10) if r[1] == r[1] else 3) for r in x.tolist()]
    shapes["ints beside floats"] += [(1.5, 2), (1.5, 2.0), (1.5, -0.0), (1.5, 0)]  # 2 and 2.0, -0.0 and 0: one
    for name, values in shapes.items():
        assert outputs.row_shape(values[0]) is not None, name
        fast, slow = encode(values), _slow(values)
        assert list(fast.numeric) == list(slow.numeric), name
        for label in fast.numeric:
            assert np.array_equal(fast.numeric[label], slow.numeric[label], equal_nan=True), (name, label)
        assert _classes(fast.keys) == _classes(slow.keys), name
    assert len(set(encode(shapes["tuple"][-2:]).keys.tolist())) == 1  # -0.0 is 0.0
    assert len(set(encode(shapes["exact"][-5:]).keys.tolist())) == 4  # 1/3 twice; 1/3 + 1e-30; 1 and 1.0 apart
    assert encode(shapes["exact"]).numeric["y[0]"][-5] == 1 / 3
    assert len(set(encode(shapes["pairs"][-2:]).keys.tolist())) == 1  # one NaN
    assert len(set(encode(shapes["ints beside floats"][-4:]).keys.tolist())) == 2
    # booleans, strings, a number beside a tuple, empty outputs, bare numbers: not rows
    for v in ((1.0, True), {"a": 1.0, "b": "x"}, ((1.0,), 2.0), ("a", 1.0), {}, (), ((), ()), 1.5, Fraction(1)):
        assert outputs.row_shape(v) is None, v
    assert outputs.row_shape((Fraction(1), 2)) == ("tuple", 2)
    assert outputs.row_shape(((1.0,), (), (2, 3.0))) == ("tuples", (1, 0, 2))


def test_an_outputs_key_is_its_own_whatever_else_is_encoded_with_it():
    """Cells are sets of outputs: an output's key (its cell) must not depend on the other
    outputs of its sample or chunk (one chunk's outputs all of one shape, the next's not), and
    outputs of different shapes with the same numbers are different outputs."""
    from fuzzpy.audit.outputs import stable_key

    outputs = [(1.5, 2.0), (1, 2.0), (1.0, 2.0), ((1.0, 2.0),), ((1.0,), (2.0,)), ((1.0, 2.0), (3.0,)),
               {"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0}, (Fraction(1, 3), 2.0), (1.5, "x"), 2.5, (True, 1.0),
               ((Fraction(10**30), 1.0),), ("a",)]
    alone = [int(encode([v]).keys[0]) for v in outputs]
    together = encode(outputs).keys.tolist()
    assert together == alone
    for i, v in enumerate(outputs):  # beside copies of itself (a sample of one shape) and beside all
        assert encode([v] * 3).keys.tolist() == [alone[i]] * 3
        assert encode(outputs[i:] + outputs[:i]).keys.tolist()[0] == alone[i]
    # the same output (1 and 1.0 are one, as in the canonical text) has one key; the others differ
    assert alone[1] == alone[2]
    assert len(set(alone)) == len(outputs) - 1
    assert len({stable_key(v) for v in outputs}) == len(outputs) - 1  # the canonical text agrees


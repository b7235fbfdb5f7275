"""Outputs handed to the encoder coordinate by coordinate (`outputs.Rows`, made by
`batched._number_rows` from the batched sampler's lanes): they must encode exactly as the
outputs themselves do (the same keys, so the same cells; the same coordinates), read back as the
same values, and be refused (None: the list path, always correct) for anything but floats, ints
and Fractions in a shape the encoder takes as rows (`outputs.row_shape`)."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given

from fuzzpy.audit.batched import _number_rows
from fuzzpy.audit.outputs import Rows, _exact_codes, concat, encode, stable_key
from fuzzpy.runtime.batch import Lanes, unlane
from fuzzpy.runtime.ratios import Ratios
from tests.oracle.conftest import _recursion_limit  # noqa: F401 - raised for the module, as for the oracle's
from tests.oracle.strategies import oracle_settings, programs
from tests.oracle.support import DEPTH_LIMIT, call_depth

N = 40


def _ratios(rng, bits: int) -> Lanes:
    """Unreduced exact rationals (a common factor in numerator and denominator), some negative,
    some zero, some equal to others."""
    num = [int(x) for x in rng.integers(-2**20, 2**20, N)]
    den = [int(x) for x in rng.integers(1, 2**12, N)]
    num[::5], num[1::7] = [0] * len(num[::5]), [3] * len(num[1::7])
    den[1::7] = [9] * len(den[1::7])
    factor = [int(x) << bits for x in rng.integers(1, 50, N)]
    return Lanes.of_ratios(Ratios(np.array([p * f for p, f in zip(num, factor)], dtype=object),
                                  np.array([q * f for q, f in zip(den, factor)], dtype=object), 2 * bits + 40))


def _leaves(rng) -> dict:
    floats = np.round(rng.normal(0, 3, N), 1)
    floats[::6], floats[1::9], floats[2::11] = -0.0, 0.0, np.nan
    sums = _ratios(rng, 3).ratios
    empty = np.zeros(N, dtype=bool)
    empty[::4] = True
    mixed = [Fraction(int(x), 7) if i % 3 else float(x) for i, x in enumerate(rng.integers(-20, 20, N))]
    return {
        "ratios": _ratios(rng, 5),
        "big ratios": _ratios(rng, 90),  # past 64 bits until their common factor is divided out
        "floats": Lanes.of_floats(floats),
        "sums, some over no rows": Lanes.of_sums(sums, empty),
        "a list of floats and Fractions": Lanes(mixed),
        "integral Fractions": Lanes(rng.integers(-5, 5, N), frac=True),
        "ints (count's lanes)": Lanes(rng.integers(-5, 5, N)),
        "ints among floats and Fractions": Lanes([2, 2.0, Fraction(2), -0.0, 0] * (N // 5)),
        "a constant float": 2.5,
        "a constant int": 7,
        "a constant Fraction": Fraction(1, 3),
        "a huge Fraction": Lanes([Fraction(10**400, 3), Fraction(-10**400)] * (N // 2)),
    }


def _check(value, n: int = N) -> None:
    rows = _number_rows(value, n)
    assert type(rows) is Rows
    values = unlane(value, n)
    assert list(rows) == values and [repr(v) for v in rows] == [repr(v) for v in values]  # types too
    fast, slow = encode(rows, keep_raw=True), encode(values, keep_raw=True)
    assert fast.keys.tolist() == slow.keys.tolist()
    texts: dict = {}  # the cells are those of the outputs' canonical text: equal outputs, one key
    assert [texts.setdefault(stable_key(v), k) for v, k in zip(values, fast.keys.tolist())] == fast.keys.tolist()
    assert len(set(fast.keys.tolist())) == len(texts)
    assert list(fast.numeric) == list(slow.numeric)
    for label in fast.numeric:
        assert np.array_equal(fast.numeric[label], slow.numeric[label], equal_nan=True), label
    for i in (0, n // 2, n - 1):
        assert fast.label_of(int(fast.keys[i])) == slow.label_of(int(fast.keys[i]))


@pytest.mark.parametrize("shape", ["tuple", "pairs", "dict"])
def test_rows_encode_as_the_outputs_themselves(shape):
    leaves = list(_leaves(np.random.default_rng(4)).values())
    if shape == "tuple":
        value = tuple(leaves)
    elif shape == "pairs":
        value = tuple(tuple(leaves[i:i + 3]) for i in range(0, len(leaves), 3))
    else:
        value = {f"k{i}": x for i, x in enumerate(leaves)}
    _check(value)


def test_rows_keep_the_cells_apart_and_together():
    """Equal rationals share a cell however they were written (unreduced); 1/3 and its nearest
    float, and 0.0 and -0.0 as the list path has them."""
    third = Ratios(np.array([1, 2, 3, 1], dtype=object), np.array([3, 6, 9, 2], dtype=object), 8)
    value = (Lanes.of_ratios(third), Lanes.of_floats(np.array([0.0, -0.0, 0.0, 0.0])))
    enc = encode(_number_rows(value, 4))
    assert len(set(enc.keys[:3].tolist())) == 1 and enc.keys[3] != enc.keys[0]
    floats = (Lanes([1 / 3, 1 / 3, 1 / 3, 0.5]), Lanes.of_floats(np.zeros(4)))
    assert encode(_number_rows(floats, 4)).keys[0] != enc.keys[0]  # the float 1/3 is not the rational
    _check(value, 4)


NOT_ROWS = {
    "booleans": (Lanes(np.arange(N) > 3),),
    "a boolean among floats": (Lanes([1.0] * (N - 1) + [True]),),
    "lanes holding tuples": (Lanes([(1.0, 2.0)] * N),),
    "a number beside a tuple": (Lanes.of_floats(np.zeros(N)), (Lanes.of_floats(np.zeros(N)),)),
    "a constant boolean": (True, Lanes.of_floats(np.zeros(N))),
    "a string": ("a", Lanes.of_floats(np.zeros(N))),
    "one number, not a tuple": Lanes.of_floats(np.zeros(N)),
    "an empty tuple": (),
    "empty tuples": ((), ()),
    "an empty dict": {},
}


@pytest.mark.parametrize("name", list(NOT_ROWS))
def test_outputs_that_are_not_numbers_in_a_row_shape_are_not_rows(name):
    value = NOT_ROWS[name]
    assert _number_rows(value, N) is None  # the list path then encodes the outputs themselves


def test_rows_slice_and_join_as_lists():
    leaves = _leaves(np.random.default_rng(5))
    value = (leaves["ratios"], leaves["floats"], leaves["a constant Fraction"])
    rows, values = _number_rows(value, N), unlane(value, N)
    assert rows[5:17] == values[5:17] and rows[-3] == values[-3] and len(rows[5:17]) == 12
    assert rows[5:17][2:4] == values[7:9]
    whole = concat([encode(rows[:13], keep_raw=True), encode(rows[13:], keep_raw=True)])
    assert type(whole.raw) is Rows and whole.raw == values  # joined, still not built
    assert whole.keys.tolist() == encode(values).keys.tolist()
    assert repr(rows[:2]) == repr(values[:2])
    with pytest.raises(IndexError):
        rows[N]


def _one_code(x: Fraction) -> int:
    """The code `outputs._pair_codes` documents, in Python ints, one rational at a time."""
    def int_code(v: int) -> int:
        return v if -2**63 <= v < 2**63 else 2**62 + v % (2**61 - 1)

    code = ((int_code(x.numerator) * 0x100000001B3) ^ int_code(x.denominator) ^ 0x5851F42D4C957F2D) % 2**64
    return code - 2**64 if code >= 2**63 else code


def test_integer_codes_past_64_bits_are_vectorised_as_one_by_one():
    rng = np.random.default_rng(6)
    xs = [Fraction(int(rng.integers(-2**62, 2**62)) << int(s), int(rng.integers(1, 2**40)) << int(t))
          for s, t in zip(rng.integers(0, 80, 300), rng.integers(0, 80, 300))]
    xs += [Fraction(-2**63), Fraction(2**63 - 1), Fraction(2**63), Fraction(-2**63 - 1), Fraction(1, 2**64)]
    codes = _exact_codes(xs).tolist()
    assert codes == [_one_code(x) for x in xs]
    assert len(set(codes)) == len(set(xs))


def test_chunks_of_two_shapes_join_as_a_list():
    one = _number_rows((Lanes.of_floats(np.arange(4.0)), Lanes.of_floats(np.ones(4))), 4)
    other = _number_rows(((Lanes.of_floats(np.arange(4.0)),), (Lanes.of_floats(np.ones(4)),)), 4)
    whole = concat([encode(one, keep_raw=True), encode(other, keep_raw=True)])
    assert type(whole.raw) is list and whole.raw == list(one) + list(other)
    assert whole.keys[1] != whole.keys[5]  # (1.0, 1.0) and ((1.0,), (1.0,)): two outputs
    assert whole.label_of(int(whole.keys[5])) == "((1.0), (1.0))"


# ---- generated programs ------------------------------------------------------------------------

N_GENERATED = int(os.environ.get("FUZZPY_ROWS_EXAMPLES", "150"))


@pytest.mark.slow
@oracle_settings(N_GENERATED)
@given(programs())
def test_generated_programs_encode_alike_drawn_as_rows_or_as_values_and_keys_are_each_outputs_own(program):
    """On the soundness oracle's generated programs (tests/oracle/generator.py): drawing with
    rows gives the outputs and the encoding the list of values gives, and each output's key is
    the one it has encoded alone."""
    import fuzzpy.audit.batched as batched
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.checking.program import check_source

    with call_depth(DEPTH_LIMIT):
        report = check_source(program.text, "gen.fz")
        if not report.ok:
            return
        delta = Fraction(0) if report.is_pure else Fraction(1, 10**5)
        inputs = [x for p in program_pairs(report, np.random.default_rng(0), 4, delta=delta)[:2] for x in (p.a, p.b)]
        with_rows = program_sampler(report).many(inputs, 12, np.random.default_rng(1))
        real = batched._number_rows
        batched._number_rows = lambda value, n: None
        try:
            as_values = program_sampler(report).many(inputs, 12, np.random.default_rng(1))
        finally:
            batched._number_rows = real
    if with_rows is None:
        return
    for rows, values in zip(with_rows, as_values):
        assert repr(list(rows)) == repr(values), program.text
        a, b = encode(rows), encode(values)
        assert a.keys.tolist() == b.keys.tolist(), program.text
        assert a.keys.tolist() == [int(encode([v]).keys[0]) for v in values], program.text

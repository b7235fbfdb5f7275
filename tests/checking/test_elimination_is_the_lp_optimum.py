"""At each mechanism the checker maximises the argument's distance over the split constraints.
It does so exactly, by eliminating parts newest-first (sum_k c_k d_k <= max_k c_k * parent); this
test checks that the result IS the linear program's optimum, against PuLP as an oracle, and that
the elimination yields a dual certificate verified in exact arithmetic."""

from fractions import Fraction as F

import pulp
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzpy.checking.checker import Checker
from fuzzpy.checking.typeexpr import TypeResolver


def _system(draw_ops):
    ck = Checker({}, TypeResolver({}), {})
    symbols = ["r0", "r1"]
    for parent_terms, k in draw_ops:
        parent = {}
        for idx, coef in parent_terms:
            sym = symbols[idx % len(symbols)]
            parent[sym] = parent.get(sym, F(0)) + F(coef)
        parts = ck.split(parent, [f"p{i}" for i in range(k)])
        symbols.extend(next(iter(d)) for d in parts)  # finite parents: each part is {symbol: 1}
    return ck, symbols


def _lp_max(ck, symbols, objective, root):
    prob = pulp.LpProblem("max", pulp.LpMaximize)
    x = {s: prob.add_variable(f"x{i}", lowBound=0) for i, s in enumerate(symbols)}
    prob += pulp.lpSum(float(c) * x[s] for s, c in objective.items())
    for r in ("r0", "r1"):
        prob += x[r] == (1 if r == root else 0)
    for parts, parent in ck.splits:
        prob += pulp.lpSum(x[p] for p in parts) <= pulp.lpSum(float(c) * x[s] for s, c in parent.items())
    prob.solve(pulp.HiGHS(msg=False) if pulp.HiGHS().available() else pulp.PULP_CBC_CMD(msg=False))
    return pulp.value(prob.objective) or 0.0


ops = st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([1, 2, F(1, 2), 3])),
                                  min_size=1, max_size=3),
                         st.integers(2, 4)), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(ops, st.lists(st.tuples(st.integers(0, 60), st.sampled_from([1, 2, F(1, 3), 5])), min_size=1, max_size=6))
def test_elimination_equals_the_lp_optimum(draw_ops, obj_terms):
    ck, symbols = _system(draw_ops)
    objective = {}
    for idx, coef in obj_terms:
        sym = symbols[idx % len(symbols)]
        objective[sym] = objective.get(sym, F(0)) + F(coef)
    flat = ck.eliminate(objective)
    assert set(flat) <= {"r0", "r1"}
    for root in ("r0", "r1"):
        exact = flat.get(root, F(0))
        assert abs(float(exact) - _lp_max(ck, symbols, objective, root)) < 1e-6


def test_the_elimination_is_a_dual_certificate():
    """For max c.x s.t. sum(parts_j) - parent_j(x) <= 0 and x_root = 1, the multipliers
    y_j = max coefficient met at split j make every reduced cost non-positive, so by weak duality
    c.x <= y_root for every feasible x: checked in fractions."""
    ck, symbols = _system([([(0, 1)], 3), ([(2, 1), (0, 1)], 2)])  # parts of r0, then of (p0 + r0)
    objective = {symbols[5]: F(1), symbols[3]: F(2), symbols[2]: F(1)}
    # dual values by hand: the later split j=1 meets coefficient 1 -> y1 = 1; substituting, the
    # first split meets max(2 + 0, 1 + y1) = 2 -> y0 = 2; the root pays y0 + y1 = 3.
    y = {0: F(2), 1: F(1)}
    for i, (parts, parent) in enumerate(ck.splits):
        for p in parts:
            # reduced cost of part p: c_p + sum over splits whose parent mentions p - y_i <= 0
            reduced = objective.get(p, F(0)) + sum(y[j] * par.get(p, F(0)) for j, (_, par) in enumerate(ck.splits))
            assert reduced - y[i] <= 0
    assert ck.eliminate(objective) == {"r0": F(3)}

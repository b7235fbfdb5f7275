"""Least annotations for recursive functions: a linear program solved with PuLP, certified exactly.

The checker emits constraints `lhs <= rhs` between coefficients that mention unknowns (the
sensitivity annotations of recursive functions, and maxima of non-constant coefficients).  All
of them are monotone, so the least solution is the componentwise minimum.  When plain
iteration from zero reaches a fixpoint within a few rounds, that fixpoint is the exact least
solution and no solver is needed (most recursive functions: PuLP is not even imported).
Otherwise we minimise the sum of unknowns with PuLP (HiGHS in-process when available).  The float optimum is
only a hint: it is turned into fractions and *certified* by checking every constraint exactly; a violated
constraint lifts its unknown (never lowers anything), so an accepted value is always a valid,
sound annotation.  Systems are cached by their canonical form, so an unchanged function is
never re-solved.  This is the least solution of docs/soundness.md, rule Recursion.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from ..typesystem.sens import INF, Coef, Lin

Constraint = tuple[Coef, Coef]
# pulp >= 3.3 builds variables through the problem (`add_variable`); pyproject pins that.
LP_STATS = {"solves": 0, "cache_hits": 0}


class Unsolvable(Exception):
    """The exact certificate could not be established (reported as E0304 by the checker)."""


def _canonical(constraints: list[Constraint], unknowns: list[str]) -> tuple[tuple, tuple[str, ...]]:
    """Rename unknowns to u0, u1, ... in order of first appearance: equal systems share a key."""
    order: dict[str, int] = {}

    def enc(c: Coef):
        if isinstance(c, Lin):
            for u, _ in c.terms:
                order.setdefault(u, len(order))
            return ("lin", c.const, tuple(sorted((order[u], k) for u, k in c.terms)))
        return ("inf",) if c == INF else ("c", Fraction(c))

    key = tuple((enc(a), enc(b)) for a, b in constraints)
    for u in unknowns:
        order.setdefault(u, len(order))
    names = tuple(sorted(order, key=order.get))
    return key, names


def solve_least(constraints: list[Constraint], unknowns: list[str]) -> dict[str, Coef]:
    """Certified least (up to solver precision, always sound) values of `unknowns`."""
    key, names = _canonical(constraints, unknowns)
    hits = _solve_canonical.cache_info().hits
    values = _solve_canonical(key, len(names))
    LP_STATS["cache_hits"] += _solve_canonical.cache_info().hits - hits
    return {names[i]: v for i, v in enumerate(values)}


def _eval(enc, values) -> Coef:
    tag = enc[0]
    if tag == "inf":
        return INF
    if tag == "c":
        return enc[1]
    total: Coef = enc[1]
    for i, k in enc[2]:
        v = values[i]
        if v == INF:
            return INF
        total += k * v
    return total


KLEENE_ROUNDS = 64


def _kleene(key: tuple, n: int) -> tuple[Coef, ...] | None:
    """Exact least fixpoint by iteration from zero, when it stabilises in a few rounds.

    Every constraint with an unknown on its right raises that unknown to its left side; all
    left sides are monotone, so if an iteration changes nothing, the values are the least
    solution, in exact arithmetic (Kleene).  Systems that only converge in the limit
    (s >= 1 + s/2) or diverge (s >= 1 + s) are left to the LP."""
    values: list[Coef] = [Fraction(0)] * n
    rows = [(a, b[2][0][0], b[2][0][1]) for a, b in key
            if b[0] == "lin" and len(b[2]) == 1 and b[1] == 0 and b[2][0][1] > 0]
    if len(rows) != sum(1 for _, b in key if b[0] == "lin"):
        return None
    for _ in range(KLEENE_ROUNDS):
        changed = False
        for a, i, k in rows:
            need = _eval(a, values)
            need = need if need == INF else need / k
            if need > values[i]:
                values[i] = need
                changed = True
        if not changed:
            return tuple(values)
    return None


@lru_cache(maxsize=1024)
def _solve_canonical(key: tuple, n: int) -> tuple[Coef, ...]:
    exact = _kleene(key, n)
    if exact is not None:
        return exact
    LP_STATS["solves"] += 1
    infinite = _propagate_infinity(key, n)
    finite_rows = [(a, b) for a, b in key if not _mentions(a, infinite) and not _mentions(b, infinite)
                   and a != ("inf",)]
    # A row no finite values satisfy makes the LP infeasible: its answer is known without
    # importing PuLP and NumPy (half a second of a small file's check).
    guess = None if any(_clearly_unsatisfiable(a, b) for a, b in finite_rows) else _lp_guess(finite_rows, n, infinite)
    if guess is None:  # infeasible in finite numbers: the least solution is infinite
        return tuple(INF for _ in range(n))
    values = [INF if i in infinite else guess[i] for i in range(n)]
    return tuple(_certify(key, values))


# Far above the solvers' feasibility tolerance (HiGHS: 1e-7), so the LP is infeasible for them too.
CLEAR_VIOLATION = Fraction(1, 1000)


def _clearly_unsatisfiable(a, b) -> bool:
    """Whether `a <= b` fails for all unknowns >= 0 by at least CLEAR_VIOLATION: a's constant
    exceeds b's by that much and every unknown weighs at least as much on the left (such as
    `1 + s <= s`, a recursion that grows by one at each call).  The LP with this row is
    infeasible, which `_lp_guess` reports as None."""
    if b[0] == "inf" or a[0] == "inf":
        return False
    left = dict(a[2]) if a[0] == "lin" else {}
    right = dict(b[2]) if b[0] == "lin" else {}
    return a[1] - b[1] >= CLEAR_VIOLATION and all(left.get(i, 0) >= right.get(i, 0) for i in left.keys() | right)


def _mentions(enc, idx: set[int]) -> bool:
    return enc[0] == "lin" and any(i in idx for i, _ in enc[2])


def _propagate_infinity(key: tuple, n: int) -> set[int]:
    """Unknowns forced to infinity: any rhs unknown of a constraint whose lhs is infinite."""
    inf: set[int] = set()
    changed = True
    while changed:
        changed = False
        for a, b in key:
            lhs_inf = a == ("inf",) or _mentions(a, inf)
            if lhs_inf and b[0] == "lin":
                for i, _ in b[2]:
                    if i not in inf:
                        inf.add(i)
                        changed = True
    return inf


def _lp_guess(rows, n: int, infinite: set[int]) -> list[Fraction] | None:
    import pulp

    prob = pulp.LpProblem("least_sensitivities", pulp.LpMinimize)
    xs = [prob.add_variable(f"u{i}", lowBound=0) for i in range(n)]

    def expr(enc):
        if enc[0] == "c":
            return float(enc[1])
        return float(enc[1]) + pulp.lpSum(float(k) * xs[i] for i, k in enc[2])

    prob += pulp.lpSum(x for i, x in enumerate(xs) if i not in infinite)
    for a, b in rows:
        prob += expr(a) <= expr(b)
    from ..stdio import stdout_discarded  # ctypes: imported only when an LP is solved

    with stdout_discarded():  # HiGHS prints a banner on stdout from C++, whatever msg=False says
        outcome = prob.solve(_solver())
    if int(getattr(outcome, "status", outcome)) != _optimal(pulp):  # PuLP 4: LpSolveStats; 3: a code
        return None
    return [Fraction(x.value() or 0).limit_denominator(10**6) for x in xs]


def _optimal(pulp) -> int:
    """The status code of an optimal solve: LpStatusOptimal in PuLP 3, LpSolveStatus in PuLP 4."""
    legacy = getattr(pulp.constants, "LpStatusOptimal", None)
    return int(legacy if legacy is not None else pulp.constants.LpSolveStatus.Optimal)


def _solver():
    import pulp

    highs = pulp.HiGHS(msg=False)
    if highs.available():
        return highs
    cbc = getattr(pulp, "PULP_CBC_CMD", None)  # bundled with PuLP 3 only
    if cbc is None:
        raise Unsolvable("no LP solver is available (highspy is not installed)")
    return cbc(msg=False)


def _certify(key: tuple, values: list[Coef], rounds: int = 200) -> list[Coef]:
    """Exact check of every constraint; lift the right-hand unknown of any violated one."""
    for _ in range(rounds):
        violated = False
        for a, b in key:
            lhs, rhs = _eval(a, values), _eval(b, values)
            if lhs <= rhs:
                continue
            if b[0] != "lin" or len(b[2]) == 0:
                continue  # a declared constant annotation: the checker reports it (E0301)
            violated = True
            # Raise the first unknown of the right-hand side just enough (its coefficient > 0).
            i, k = b[2][0]
            if k <= 0:
                raise Unsolvable("non-monotone constraint")
            values[i] = values[i] + (lhs - rhs) / k
        if not violated:
            return values
    raise Unsolvable("certification did not converge")

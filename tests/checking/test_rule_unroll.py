"""Rule Unroll (docs/soundness.md): a recursion over public constants makes a new instance key at
each level, so it is unrolled and charged exactly; the checker bounds the nesting the runtime will
have (depth, and draw depth for calls under `sample`) by limits.CALL_DEPTH, the number of calls by
limits.MAX_CALLS, and the size of argument types by MAX_TYPE_SIZE (E0306).

Attacks found by the review rounds and pinned as regression tests.  Runs use the soundness oracle
(`fuzzpy.audit.oracle.audit_pair`).
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
from check_and_run import ROW_A, assert_accepted_exactly, audit, exactly, make_tables, refused_report, violations

from fuzzpy.audit.oracle import call_depth


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"


def test_a_recursion_on_a_constant_is_unrolled_with_its_exact_doubling():
    """First review round, handled: x doubled at each of 3 levels is 8-sensitive, exactly."""
    assert_accepted_exactly("function f (i : num) (x : num) : num { if i > 0 then f (i - 1) (x + x) else x }\n"
                            "function main (db : bag T) : fuzzy num { laplace 1 (f 3 (count db)) }", F(1), [8])


def test_a_deterministic_300_level_recursion_is_unrolled_with_its_exact_doubling():
    """First review round: once widened after 256 levels (and refused); a recursion on public
    constants is now unrolled to the end: x doubles 300 times, so the count is 2^300-sensitive,
    exactly."""
    assert_accepted_exactly("function f (i : num) (x : num) : num { if i > 0 then f (i - 1) (x + x) else x }\n"
                            "function main (db : bag T) : fuzzy num { laplace 1 (f 300 (count db)) }",
                            1, [2 ** 300])


def test_a_loop_of_nested_samples_in_the_bound_does_not_nest_calls(tables):
    """Seventh review round (7a, resources), handled: `sample x = f (i - 1)` returns a distribution
    at once; it is drawn from depth 0 (rule Unroll's draw depth): accepted with the limit at 40,
    and runs 45 levels."""
    src = ("function f (i : int) : fuzzy num { if i <= 0 then return 0 else (sample x = f (i - 1); return x) }\n"
           + MAIN + "{ sample a = f 45; laplace 1 (count db) }")
    r, pair = audit(src, tables, "", ROW_A, depth=40)
    assert r.ok and pair.violations == [] and pair.a.status == pair.b.status == "ok"


def test_an_unrolled_recursion_at_the_depth_limit_runs(tables):
    """Seventh review round (7a), handled: depth = CALL_DEPTH is allowed and really fits (main
    itself is not a runtime call)."""
    r, pair = audit(DEEP + MAIN + "{ laplace 1 (count db + deep 38) }", tables, "", ROW_A, depth=40)
    assert r.ok and pair.violations == [] and pair.a.status == "ok"
    with call_depth(40):
        refused_report(DEEP + MAIN + "{ laplace 1 (count db + deep 40) }", "E0306")


# ---- long, nested and computed loops -------------------------------------------------------------------

INNER_OUTER = ("function inner (j : int) (db : bag T) : fuzzy num {\n"
               "  if j <= 0 then return 0 else (sample x = laplace 0.01 (count db); inner (j - 1) db) }\n"
               "function outer (i : int) (db : bag T) : fuzzy num {\n"
               "  if i <= 0 then return 0 else (sample y = inner 100 db; outer (i - 1) db) }\n")
LOOP = ("function loop (i : {t}) (db : bag T) : fuzzy num {{\n"
        "  if i {cmp} 0 then return 0 else (sample x = laplace 0.01 (count db); loop (i - {step}) db) }}\n")


@pytest.mark.parametrize("prog, eps", [
    (INNER_OUTER + MAIN + "{ outer 100 db }", 100),                                         # 10,000 releases, nested
    (LOOP.format(t="int", cmp="<=", step="1") + MAIN + "{ loop (3 * 100 + 7 - 7) db }", 3),   # computed count
    ("param k : int = 25;\n" + LOOP.format(t="int", cmp="<=", step="1") + MAIN + "{ loop (k * 4) db }", 1),
    (LOOP.format(t="int", cmp="==", step="2") + MAIN + "{ loop 300 db }", F(3, 2)),            # step 2
    (LOOP.format(t="num", cmp="<=", step="0.1") + MAIN + "{ loop 30 db }", 3),                # fractional step
    ("function loop (i : int) (db : bag T) : fuzzy num {\n  if i <= 0 then return 0 else (sample x = laplace 0.01 "
     "(count db); sample z = (if i > 50 then loop 0 db else return 0); loop (i - 1) db) }\n"
     + MAIN + "{ loop 300 db }", 3),
], ids=["nested-10000", "computed", "param", "step-2", "fractional", "branch-on-constant"])
def test_loops_on_constants_are_charged_exactly(prog, eps, tables):
    """Seventh review round (7b), handled: rule Unroll is exact for long, nested and computed
    loops."""
    r = exactly(prog, eps, [1])
    assert violations(r, tables, [("", ROW_A)]) == []


def test_a_loop_that_misses_its_base_case_is_refused():
    """Seventh review round (7b), handled: stepping by 2 from an odd count never reaches `== 0`
    (E0306)."""
    refused_report(LOOP.format(t="int", cmp="==", step="2") + MAIN + "{ loop 301 db }", "E0306")


# ---- the size of argument types -------------------------------------------------------------------------

def _check_in_subprocess(src: str, timeout: float):
    tests_dir = str(Path(__file__).resolve().parents[1])
    code = (f"import sys; sys.path.insert(0, {tests_dir!r}); from check_and_run import check; "
            f"r = check({src!r}); print(r.ok)")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-300:]


def test_a_recursion_doubling_its_type_variable_is_checked_in_bounded_time():
    """Seventh review round (7b), finding 5 (medium: the checker did not terminate on a two-line
    program): a recursion whose type-variable instantiation doubles at each level took time
    exponential in its depth.

    `f (n - 1) (x, x)` with `(x : 'a)` makes a new instance key per level (rule Instance: the
    parameter types are part of the key), with a type of 2^k leaves shared as a DAG.  Types were
    frozen dataclasses whose hash was recomputed recursively at each use (the instance key, the
    `_has_tvar` cache), without memoisation, so each level cost twice the previous one: depth 16
    took ~1 s, 18 ~3 s, 20 ~40 s, 24 about ten minutes; with a released depth (speculative, and
    rule Widen only forgets numeric constants, not types) the check did not end before
    UNROLL_DEPTH = 20,000 levels, i.e. never.  The same held for untyped parameters.  Suggested
    fix (made): cache the hash of a type in the instance (or intern types), and bound the size of a
    parameter type (nodes counted as a tree) with a clear error (MAX_TYPE_SIZE, E0306)."""
    src = ("function f (n : num) (x : 'a) : num { if n <= 0 then 0 else f (n - 1) (x, x) }\n"
           + MAIN + "{ laplace 1 (f 26 (count db)) }")
    assert _check_in_subprocess(src, 20) in ("True", "False")  # before the fix: "timeout" (more than an hour)


def test_the_same_recursion_on_a_fixed_type_is_fast():
    """Seventh review round (7b), finding 5, the control."""
    exactly("function f (n : num) (x : 'a) : num { if n <= 0 then 0 else f (n - 1) x }\n"
            + MAIN + "{ laplace 1 (clip 0 1 (f 26 (count db))) }", 0, [0])

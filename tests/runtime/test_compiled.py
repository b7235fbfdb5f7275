"""Public functions compiled to Python (fuzzpy/runtime/compiled.py) compute what the interpreter
computes: the same values of the same types, the same releases, the same error at the same
call depth; and only functions over public values are compiled."""

from __future__ import annotations

from fractions import Fraction as F

import pandas as pd
import pytest

from fuzzpy import limits
from fuzzpy.checking.program import check_source
from fuzzpy.runtime import compiled as C
from fuzzpy.runtime.interpreter import Interpreter, RunFailure, RunState, evaluate_entry
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.typesystem import ir as I

SCHEMA = "schema T { x : num[0, 10], k : cat{\"a\", \"b\"} }\n"
DB = pd.DataFrame({"x": [1.5, 7.0, 10.0, 0.0], "k": pd.Categorical(["a", "b", "a", "b"], ["a", "b"])})

HELPERS = """
function len (l : list num) : num { case l of { [] => 0 | h :: t => 1 + len t } }
function lsum (l : list num) : num { case l of { [] => 0 | h :: t => h + lsum t } }
function append (xs : list num) (ys : list num) : list num { case xs of { [] => ys | h :: t => h :: append t ys } }
function rev (xs : list num) : list num { case xs of { [] => [] | h :: t => append (rev t) [h] } }
function member (x : string) (xs : list string) : bool {
  case xs of { [] => false | h :: t => if h == x then true else member x t } }
function pairs (xs : list num) : list (num, num) { case xs of { [] => [] | h :: t => (h, h * h) :: pairs t } }
function firsts (ps : list (num, num)) : list num { case ps of { [] => [] | p :: t => let (a, b) = p; a :: firsts t } }
function pick (v : num + string) : num { case v of { inl n => n / 3 | inr s => if s == "x" then 1 else 2 } }
function shadow (x : num) : num { let y = x + 1; let x = y * 2; let y = x - 1; y + x }
function down (n : num) : num { if n <= 0 then 0 else 1 + down (n - 1) }
"""


def check(body: str, ret: str = "fuzzy num", extra: str = HELPERS):
    report = check_source(SCHEMA + extra + f"\nfunction main (db : bag T) : {ret} {{ {body} }}", "t.fz")
    errors = [d for d in report.diagnostics if d.severity == "error" and d.code not in ("E0302", "E0309")]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    return report.entry_instance


def run(entry, compiled: bool, seed: int = 3):
    state = RunState(RandomSource.seeded(seed), compiled=compiled)
    try:
        out = evaluate_entry(entry, {"db": DB}, state)
    except RunFailure as exc:
        return ("failed", exc.diagnostics[0].message, exc.diagnostics[0].span, [r.value for r in state.releases])
    return ("ok", out.value, type(out.value).__name__, [(r.value, type(r.value).__name__) for r in state.releases])


def both(body: str, ret: str = "fuzzy num", extra: str = HELPERS):
    entry = check(body, ret, extra)
    fast, ref = run(entry, True), run(entry, False)
    assert fast == ref
    return fast


def instances(entry) -> dict[str, I.Instance]:
    return {n.name: n for n in I.reachable(entry) if isinstance(n, I.Instance)}


# ---- the same values ---------------------------------------------------------------------------

# `n` (the table's size, 4) is not a check-time constant: the checker would otherwise fold the
# calls on constants into their values, leaving nothing to run.
@pytest.mark.parametrize("body, ret, expected", [
    ("return (len [n, 2, 3], lsum [n, 2, 3.5])", "fuzzy (num, num)", (3, F(19, 2))),
    ("return (rev [1, n, 3])", "fuzzy (list num)", (3, 4, 1)),
    ("let s = if n > 2 then \"b\" else \"z\"; return (member s [\"a\", \"b\"], member s [\"a\"], member s [])",
     "fuzzy (bool, bool, bool)", (True, False, False)),
    ("return (firsts (pairs [2, n]), pairs [n])", "fuzzy (list num, list (num, num))", ((2, 4), ((4, 16),))),
    ("let s = if n > 2 then \"x\" else \"y\"; let t = if n > 5 then \"x\" else \"y\";"
     "return (pick (inl n : num + string), pick (inr s : num + string), pick (inr t : num + string))",
     "fuzzy (num, num, num)", (F(4, 3), 1, 2)),
    ("return (shadow n)", "fuzzy num", 19),
    ("return (down (n * 10))", "fuzzy num", 40),
])
def test_public_functions_give_the_interpreters_values(body, ret, expected):
    status, value, *_ = both("let n = count db; " + body, ret)
    assert status == "ok" and value == expected


def test_released_floats_reach_compiled_functions_as_the_interpreter_takes_them():
    # a released value is a float; `+` takes it exactly (as a Fraction), in both evaluators
    status, value, kind, releases = both(
        "sample n = laplace 1 (count db); return (lsum [n, 1 / 3], len [n], member \"a\" [\"a\"])",
        "fuzzy (num, num, bool)")
    assert status == "ok" and len(releases) == 1
    assert value[0] == pytest.approx(releases[0][0] + 1 / 3)


def test_the_compiled_path_is_taken_and_walks_no_step_of_the_body(monkeypatch):
    entry = check("let n = count db; return (lsum (rev [1, 2, 3, n]))")
    cases = []
    orig = Interpreter.case_on
    monkeypatch.setattr(Interpreter, "case_on", lambda self, *a: cases.append(1) or orig(self, *a))
    assert run(entry, False)[1] == 10.0 and len(cases) > 10
    cases.clear()
    assert run(entry, True)[1] == 10.0 and cases == []


# ---- which functions are compiled ----------------------------------------------------------------

def test_functions_over_public_values_are_compiled_and_no_other():
    extra = HELPERS + """
    function noisy (b : bag T) : fuzzy num { laplace 1 (count b) }
    function size (b : bag T) : num { count b }
    function twice (f : num -> num) (x : num) : num { f (f x) }
    function calls_size (b : bag T) (xs : list num) : num { size b + len xs }
    """
    entry = check("sample a = noisy db; return (len [a], lsum [size db], twice (fun y -> y + 1) 0, calls_size db [1])",
                  "fuzzy (num, num, num, num)", extra)
    found = instances(entry)
    for name in ("len", "lsum"):
        assert C.compiled_function(found[name]) is not None, name
    for name in ("noisy", "size", "twice", "calls_size", "main"):  # a release, a table, an application, a callee
        assert C.compiled_function(found[name]) is None, name
    assert run(entry, True) == run(entry, False)


def test_a_function_python_will_not_compile_is_interpreted():
    # 120 nested conditions: deeper than Python's indentation limit in the translation
    nested = "0"
    for i in range(120):
        nested = f"if n == {i} then {i} else ({nested})"
    extra = f"function deep_if (n : num) : num {{ {nested} }}"
    entry = check("return (deep_if (count db + 3))", extra=extra)
    assert C.compiled_function(instances(entry)["deep_if"]) is None
    assert both("return (deep_if (count db + 3))", extra=extra)[:2] == ("ok", 7)


# ---- the call-depth limit --------------------------------------------------------------------------

def test_calls_nested_past_the_limit_fail_at_the_same_call_with_the_same_error(monkeypatch):
    monkeypatch.setattr(limits, "CALL_DEPTH", 50)
    # count db is not a check-time constant, so the recursion is not unrolled by the checker
    fail = both("sample a = laplace 1 (count db); return (a + down (count db * 20))")
    assert fail[0] == "failed" and "nested more than 50 deep" in fail[1] and len(fail[3]) == 1
    assert fail[2] is not None and fail[2].file == "t.fz"
    # main's call of down is depth 1: down n nests n + 1 calls, 49 fits
    assert both("return (down (count db * 12 + 1))")[:2] == ("ok", 49.0)
    assert both("return (down (count db * 12 + 2))")[0] == "failed"


# ---- right folds written as loops -------------------------------------------------------------------

FOLDS = HELPERS + """
function upto (n : num) : list num { if n <= 0 then [] else n :: upto (n - 1) }
function alt (l : list num) : num { case l of { [] => 1 | h :: t => h - alt t } }
function has (x : num) (l : list num) : bool { case l of { [] => false | h :: t => if h == x then true else has x t } }
function wid (l : list num) (u : list num) : num {
  case l of { [] => 0 | h :: t => max (if has h u then 0 else h) (wid t u) } }
function scaled (c : num) (l : list num) : list num { case l of { [] => [] | h :: t => let y = h * c; y :: scaled c t } }
function sh (l : list num) (k : num) : num { case l of { [] => k | h :: t => let k = h; k + sh t k } }
function tl (l : list num) : num { case l of { [] => 0 | h :: t => len t + tl t } }
function lp (l : list num) : num { case l of { [] => 0 | h :: t => len l + lp t } }
function e0 (l : list num) : list num { case l of { [] => l | h :: t => h :: e0 t } }
function rf (l : list num) : num { case l of { [] => 0 | h :: t => rf t - h } }
"""


def test_right_folds_are_loops_and_other_shapes_are_not():
    entry = check("let n = count db; let l = upto n; return (lsum l + len l + alt l + wid l (upto (n - 2)) + lsum (scaled n l)"
                  " + lsum (append l [n]) + lsum (firsts (pairs l)) + sh l n + tl l + lp l + lsum (e0 l) + rf l"
                  " + lsum (rev l))", extra=FOLDS)
    found = instances(entry)
    for name in ("lsum", "len", "alt", "wid", "scaled", "append", "pairs", "firsts"):
        assert C._right_fold(found[name]) is not None, name
    # a tail call, the call not the last operand, a parameter shadowed, the tail or the list read
    # again, the empty list's value reading the list: each stays a call per element
    for name in ("has", "rev", "sh", "tl", "lp", "e0", "rf", "upto"):
        assert C._right_fold(found[name]) is None, name
    assert run(entry, True) == run(entry, False)


@pytest.mark.parametrize("size", [0, 1, 2, 7])
def test_right_folds_give_the_interpreters_values_in_its_order(size):
    """Subtraction and float sums depend on the order of the operations: the loop applies them
    from the last element back, as the calls return."""
    body = (f"sample a = laplace 1 (count db); let l = upto (count db * {size} / 4);"
            "let fl = scaled (a / 7) l;"
            "return (alt l, lsum fl, alt fl, wid l (upto (count db * 3 / 4)), scaled 3 l, append l [a], append [] l,"
            " firsts (pairs fl), len fl, sh l a, tl l, lp l, e0 fl, rf fl)")
    ret = ("fuzzy (num, num, num, num, list num, list num, list num, list num, num, num, num, num, list num, num)")
    status, value, *_ = both(body, ret, FOLDS)
    assert status == "ok" and len(value[4]) == size


@pytest.mark.parametrize("expr", ["lsum l", "wid l u", "wid u l", "len (append l u)", "lsum (firsts (pairs l))"])
def test_a_loop_fails_at_the_call_the_recursion_fails_at(monkeypatch, expr):
    """One level per element, each checked as the call checks it; a callee inside an element
    (`has` in `wid`) runs at that element's level, so its own limit falls where it did."""
    monkeypatch.setattr(limits, "CALL_DEPTH", 30)
    outcomes = set()
    for size in range(8, 36):
        body = f"let l = upto (count db * {size} / 4); let u = upto (count db * {size // 2} / 4); return ({expr})"
        out = both(body, "fuzzy num", FOLDS)
        outcomes.add(out[0])
        if out[0] == "failed":
            assert "nested more than 30 deep" in out[1] and out[2] is not None
    assert outcomes == {"ok", "failed"}  # the sizes cross the limit


def test_a_loop_gives_back_its_levels_when_it_returns_and_when_it_fails(monkeypatch):
    monkeypatch.setattr(limits, "CALL_DEPTH", 30)
    entry = check("return (lsum (upto (count db)))", extra=FOLDS)
    inst = instances(entry)["lsum"]
    fn = C.compiled_function(inst)
    state = RunState(RandomSource.seeded(1))
    interp = Interpreter(state)
    state.depth = 5
    assert fn(interp, state, tuple(F(i) for i in range(20))) == 190
    assert state.depth == 5
    with pytest.raises(RunFailure):
        fn(interp, state, tuple(F(i) for i in range(40)))
    assert state.depth == 5


# ---- calls of itself in tail position as a loop ------------------------------------------------------

TAILS = FOLDS + """
function drop (n : num) (l : list num) : list num { if n <= 0 then l else case l of { [] => [] | h :: t => drop (n - 1) t } }
function tri (n : num) (acc : num) : num { let m = n - 1; if n <= 0 then acc else tri m (acc + n) }
function walk (v : num + num) (n : num) : num {
  case v of { inl a => if n <= 0 then a else walk (inr (a * 2) : num + num) (n - 1)
            | inr b => if n <= 0 then b else walk (inl (b - 1) : num + num) (n - 1) } }
function both_ends (l : list num) : num { case l of { [] => 0 | h :: t => if h > 2 then h + both_ends t else both_ends t } }
function swap (n : num) (a : num) (b : num) : num { if n <= 0 then a - b else swap (n - 1) b a }
"""


def test_tail_calls_are_loops_with_the_interpreters_values():
    entry = check("let n = count db; let l = upto (n * 2);"
                  "return (has 3 l, has 100 l, drop 3 l, drop 100 l, tri (n * 3) 0, walk (inl n : num + num) 5,"
                  " walk (inr n : num + num) 0, both_ends l, swap n n (n + 6), swap (n + 1) n (n + 6))",
                  "fuzzy (bool, bool, list num, list num, num, num, num, num, num, num)", TAILS)
    found = instances(entry)
    for name in ("has", "drop", "tri", "both_ends", "swap"):  # (walk's calls reach other instances of it)
        assert C._tail_calls(found[name].body, found[name]), name
    module = C._Module()
    module.function(found["tri"])
    assert "while True:" in "\n".join(module.lines)
    fast, ref = run(entry, True), run(entry, False)
    assert fast == ref and fast[0] == "ok"
    # the arguments are set at once: `swap` exchanges its parameters at every round
    assert fast[1] == (True, False, (5, 4, 3, 2, 1), (), 78, 26, 4, 33, -6, 6)


@pytest.mark.parametrize("expr", ["has 0 l", "len (drop (count db * 9 / 4) l)", "tri (count db * {size} / 4) 0",
                                  "both_ends l", "walk (inl 1 : num + num) (count db * {size} / 4)"])
def test_a_tail_loop_fails_at_the_call_the_recursion_fails_at(monkeypatch, expr):
    monkeypatch.setattr(limits, "CALL_DEPTH", 30)
    outcomes = set()
    for size in range(8, 36):
        body = f"let l = upto (count db * {size} / 4); return ({expr.format(size=size)})"
        ret = "fuzzy bool" if expr.startswith("has") else "fuzzy num"
        out = both(body, ret, TAILS)
        outcomes.add(out[0])
        if out[0] == "failed":
            assert "nested more than 30 deep" in out[1] and out[2] is not None
    assert outcomes == {"ok", "failed"}


def test_a_tail_loop_gives_back_its_levels_when_it_returns_and_when_it_fails(monkeypatch):
    monkeypatch.setattr(limits, "CALL_DEPTH", 30)
    entry = check("return (tri (count db) 0)", extra=TAILS)
    fn = C.compiled_function(instances(entry)["tri"])
    state = RunState(RandomSource.seeded(1))
    interp = Interpreter(state)
    state.depth = 5
    assert fn(interp, state, F(20), F(0)) == 210
    assert state.depth == 5
    with pytest.raises(RunFailure):
        fn(interp, state, F(40), F(0))
    assert state.depth == 5


def test_exact_arithmetic_and_types_match_on_fractions():
    status, value, kind, _ = both("let n = count db; return (lsum [n / 3, 1 / 6], len [n])", "fuzzy (num, num)")
    assert status == "ok" and value == (F(3, 2), 1) and type(value[0]) is F
    entry = check("let n = count db; return (lsum [n / 3, 1 / 6])")
    state = RunState(RandomSource.seeded(0))
    interp = Interpreter(state)
    lsum = instances(entry)["lsum"]
    fn = C.compiled_function(lsum)
    assert fn is not None and fn(interp, state, (F(1, 3), F(1, 6))) == F(1, 2)
    # a float (a released value) is taken exactly, an int as its Fraction: the interpreter's fold
    for args in [(F(1, 3), 0.25), (2, F(1, 2)), (0.1, 0.2)]:
        walked = Interpreter(RunState(RandomSource.seeded(0), compiled=False)).call_body(lsum, [args])
        got = fn(interp, state, args)
        assert got == walked and type(got) is type(walked), args


def test_a_compiled_binary_fold_is_the_interpreters_fold():
    """The two-argument call compiled code makes (whole numbers taken first, inline) gives the
    interpreter's fold_exact, value and type, on whole and other Fractions, ints, floats,
    strings and booleans, for every binary scalar primitive."""
    import itertools

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.numbers import fold_exact

    values = [F(0), F(3), F(-7), F(2**70), F(1, 3), F(-5, 2), 0, 4, -2**65, 0.5, -0.0, float("inf"),
              float("nan"), 2.0**60, "a", "b", True, False]
    it = Interpreter(RunState(RandomSource.seeded(0)))
    for name in ("add", "sub", "mul", "max", "min", "lt", "le", "gt", "ge", "eq", "ne"):
        prim = lookup(name)
        node = I.IPrim(name, [], {})
        call = C._fold_call(prim, node)
        for a, b in itertools.product(values, values):
            if (isinstance(a, str) or isinstance(b, str)) and (name not in ("eq", "ne") or type(a) is not type(b)):
                continue  # the checker lets strings only be compared with strings
            want = fold_exact(prim.fold, [a, b])
            got = call(it, a, b)
            assert type(got) is type(want) and (got == want or (got != got and want != want)), (name, a, b)


def test_the_inline_cases_of_a_compiled_fold_are_the_interpreters_fold():
    """Compiled code tries a binary fold's common case inline (comparisons of two values of one
    type, arithmetic and max/min of two whole-number Fractions) before calling it: where the
    inline test holds, the inline expression gives fold_exact's value and type."""
    import itertools

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.numbers import fold_exact, small_wholes, whole_fraction

    # whole numbers on both sides of the small table's bound (4096), as sums and products
    values = [F(0), F(3), F(-7), F(2**70), F(-(2**70)), F(1, 3), F(-5, 2), F(64), F(2048), F(4093), F(4096), 0, 4,
              -2**65, 0.5, -0.0, 2.0, float("inf"), float("nan"), "a", "b", "", True, False]
    miss = object()
    names = {"_F": F, "_wf": whole_fraction, "_direct": C._DIRECT_TYPES, "_miss": miss, "_sw": small_wholes()}
    for name in ("add", "sub", "mul", "max", "min", "lt", "le", "gt", "ge", "eq", "ne"):
        fold = lookup(name).fold
        expr, test = C._inline_fold(fold, "a", "b"), C._inline_test(fold, "a", "b")
        assert expr is not None, name
        code = compile(f"({expr}) if ({test}) else _miss", "<inline>", "eval")
        hits = 0
        for a, b in itertools.product(values, values):
            if (isinstance(a, str) or isinstance(b, str)) and (name not in ("eq", "ne") or type(a) is not type(b)):
                continue  # the checker lets strings only be compared with strings
            got = eval(code, names, {"a": a, "b": b})
            if got is miss:
                continue
            hits += 1
            want = fold_exact(fold, [a, b])
            assert type(got) is type(want) and (got == want or (got != got and want != want)), (name, a, b)
        assert hits >= 16, name


def test_compiled_code_carries_the_inline_cases():
    entry = check("let n = count db; return (lsum [n, 2], member \"a\" [\"b\", \"a\"])", "fuzzy (num, bool)")
    module = C._Module()
    module.function(instances(entry)["lsum"])
    module.function(instances(entry)["member"])
    source = "\n".join(module.lines)
    # lsum's sum as the inline whole-number addition, guarded by the operands' types
    assert "._numerator + " in source and " is _F is type(" in source


# ---- functions with effects ------------------------------------------------------------------------

EFFECTS = HELPERS + """
function noisy (b : bag T) : fuzzy num { laplace 1 (count b) }
function twice (f : num -> num) (x : num) : num { f (f x) }
function pair (b : bag T) (eps : num) : fuzzy (num, num) {
  let c = groupby (fun r -> r.k) b;
  sample counts = laplace eps (count (part c "a"), count (part c "b"));
  let (u, v) = counts;
  return (u, if v > u then v else u)
}
function node (b : bag T) (d : num) : fuzzy (list num) {
  sample n = laplace 1 (count b);
  if d == 0 then return [n]
  else if n < 0 - 1000000 then return []
  else sample rest = node b (d - 1); return (n :: rest)
}
function per_key (b : bag T) : fuzzy (list num) {
  sample parts = each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) b);
  return (values parts)
}
function sizes (b : bag T) : list num { values (pmap (fun g -> count g) (groupby (fun r -> r.k) b)) }
function rec_noisy (b : bag T) (n : num) : fuzzy num { if n <= 0 then noisy b else rec_noisy b (n - 1) }
function below (b : bag T) (t : num) (eps : num) : fuzzy (num, num) {
  let c = groupby (fun r -> r.k) (filter (fun r -> r.x < t) b);
  let lowest = count (head 1 (sort_by (fun r -> r.x) (part c "a")));
  sample per = each (fun g -> laplace eps (count g + lowest)) c;
  let vs = values per;
  return (lsum vs, len vs)
}
function by_key (b : bag T) f { f (groupby (fun r -> r.k) b) }
function spread (b : bag T) (eps : num) : fuzzy num {
  by_key b (fun ps -> laplace eps (lsum (values (pmap (fun g -> count g) ps))))
}
function record_of (b : bag T) : fuzzy num {
  let s = { lo = count (filter (fun r -> r.x < 5) b), hi = count (filter (fun r -> r.x >= 5) b) };
  laplace 1 (s.lo - s.hi)
}
"""


def run_labelled(entry, compiled: bool, seed: int = 3, batch: bool = True):
    """A run as `fuzzpy run` makes it in the user's file: every release with its labels."""
    state = RunState(RandomSource.seeded(seed), compiled=compiled, user_file="t.fz", batch=batch)
    try:
        out = evaluate_entry(entry, {"db": DB}, state)
        result: tuple = ("ok", out.value, type(out.value).__name__)
    except RunFailure as exc:
        result = ("failed", exc.diagnostics[0].message, exc.diagnostics[0].span)
    return result + ([(r.mechanism, r.value, type(r.value).__name__, r.epsilon, r.span, r.name, r.user_name,
                       r.site, r.keys) for r in state.releases],)


@pytest.mark.parametrize("body, ret", [
    ("sample a = noisy db; sample p = pair db 1; return (a, p)", "fuzzy (num, (num, num))"),
    ("node db 3", "fuzzy (list num)"),
    ("sample xs = per_key db; return (lsum xs, sizes db)", "fuzzy (num, list num)"),
    ("let d = noisy db; sample a = d; sample b = d; return (a, b, twice (fun y -> y * 3) a)",
     "fuzzy (num, num, num)"),
    ("record_of db", "fuzzy num"),
    ("sample a = below db 8 (1 / 2); sample b = spread db 1; return (a, b)", "fuzzy ((num, num), num)"),
    ("if count db > 2 then pair db 1 else return (0, 0)", "fuzzy (num, num)"),
    ("sample best = exponential 1 [\"a\", \"b\", \"c\"]"
     " (fun k -> if k == \"c\" then 0 else count (filter (fun r -> r.k == k) db));"
     "sample n = spread db 1; return (best, n)", "fuzzy (string, num)"),
])
@pytest.mark.parametrize("batch", [True, False])
def test_functions_with_effects_release_what_the_interpreter_releases(body, ret, batch):
    entry = check(body, ret, EFFECTS)
    assert C.effectful_function(instances(entry)["main"]) is not None
    for seed in (3, 4):
        fast, ref = run_labelled(entry, True, seed, batch), run_labelled(entry, False, seed, batch)
        assert fast == ref
        assert fast[0] == "ok" and fast[-1], fast
    assert any(r[7] is not None for r in fast[-1])  # the user's call sites are compared, not all None


def test_a_distribution_a_compiled_function_returns_is_drawn_afresh_each_time():
    entry = check("let d = noisy db; sample a = d; sample b = d; return (a, b)", "fuzzy (num, num)", EFFECTS)
    status, (a, b), _, releases = run_labelled(entry, True)
    assert status == "ok" and a != b and [r[1] for r in releases] == [a, b]
    assert [r[5] for r in releases] == ["a", "b"]


def test_every_function_is_compiled_with_effects_and_public_ones_alone_without():
    entry = check("sample a = noisy db; sample p = pair db 1; sample xs = per_key db;"
                  "return (a, p, lsum xs, twice (fun y -> y + 1) 0, sizes db)",
                  "fuzzy (num, (num, num), num, num, list num)", EFFECTS)
    found = instances(entry)
    for name in ("noisy", "pair", "per_key", "twice", "sizes", "main"):
        assert C.compiled_function(found[name]) is None, name  # the lanes' per-lane code: public only
        assert C.effectful_function(found[name]) is not None, name
    assert C.effectful_function(found["lsum"]) is C.compiled_function(found["lsum"])


def test_a_compiled_function_with_effects_walks_no_step_of_its_body(monkeypatch):
    entry = check("sample p = pair db 1; return p", "fuzzy (num, num)", EFFECTS)
    steps = []
    from fuzzpy.runtime.evaluator import _dispatch_table

    for name in ("e_ISample", "e_ILet", "e_IReturn", "e_IPrim", "e_ILambda"):
        orig = getattr(Interpreter, name)
        monkeypatch.setattr(Interpreter, name,
                            lambda self, *a, orig=orig, name=name: steps.append(name) or orig(self, *a))
    Interpreter._table = _dispatch_table(Interpreter)
    try:
        walked = run_labelled(entry, False)
        assert {"e_ISample", "e_ILet", "e_IReturn", "e_IPrim", "e_ILambda"} <= set(steps)
        steps.clear()
        assert run_labelled(entry, True) == walked
        # the key function `fun r -> r.k` is a value the primitive applies: its body is walked
        assert steps == []
    finally:
        monkeypatch.undo()
        Interpreter._table = _dispatch_table(Interpreter)


def test_effects_nested_past_the_limit_fail_at_the_same_call_after_the_same_releases(monkeypatch):
    monkeypatch.setattr(limits, "CALL_DEPTH", 40)
    entry = check("sample a = noisy db; sample b = rec_noisy db (count db * 20); return (a + b)", extra=EFFECTS)
    fast, ref = run_labelled(entry, True), run_labelled(entry, False)
    assert fast == ref
    assert fast[0] == "failed" and "nested more than 40 deep" in fast[1] and fast[2].file == "t.fz"
    assert len(fast[-1]) == 1
    entry = check("rec_noisy db (count db * 9)", extra=EFFECTS)  # main 1, rec_noisy 37 deep, noisy: 39
    assert run_labelled(entry, True) == run_labelled(entry, False)
    assert run_labelled(entry, True)[0] == "ok"


def test_a_call_under_a_row_budget_is_the_interpreters_call():
    """Compiled code never runs under a per-row call budget (only row-by-row evaluation sets
    one, with its own interpreter), but if it did, its calls of functions with effects would
    be the interpreter's own, which spend the budget."""
    entry = check("sample a = node db 2; return a", "fuzzy (list num)", EFFECTS)
    fn = C.effectful_function(entry)
    state = RunState(RandomSource.seeded(0))
    interp = Interpreter(state)
    dist = fn(interp, state, DB)  # main's sample: its bound, the call, runs when drawn
    state.row_calls = 100
    value = interp.draw(dist)
    # the three calls of node (d = 2, 1, 0) each spent one: main's went through call_instance
    assert len(value) == 3 and state.row_calls == 97
    state.row_calls = None
    assert interp.draw(fn(interp, state, DB)) != value and state.row_calls is None


# ---- function values' bodies -------------------------------------------------------------------------

def test_function_values_applied_by_the_scalar_evaluator_run_their_compiled_bodies(monkeypatch):
    """A lambda a primitive applies (each, the unbatched exponential's score) and the body an
    application gives a function parameter (`by_key`'s f) run as compiled code reading the
    names they captured, with what the interpreter releases."""
    entry = check("sample best = exponential 1 [\"a\", \"b\"] (fun k -> count (filter (fun r -> r.k == k) db));"
                  "sample xs = per_key db; sample s = spread db 1; return (best, lsum xs, s)",
                  "fuzzy (string, num, num)", EFFECTS)
    taken = []
    orig = Interpreter.body_code
    monkeypatch.setattr(Interpreter, "body_code", lambda self, body, *a: taken.append(
        (type(body).__name__, orig(self, body, *a) is not None)) or orig(self, body, *a))
    assert run_labelled(entry, True, batch=False) == run_labelled(entry, False, batch=False)
    kinds = {kind for kind, hit in taken if hit}
    assert len(taken) >= 5 and all(hit for _, hit in taken), taken
    # the lambdas' bodies (primitive calls) and a lambda reaching the function it wraps (an
    # application whose body the site gives), each compiled
    assert kinds == {"IPrim", "IApply"}, taken


def test_a_body_reads_its_free_names_from_the_captured_environment_or_is_walked():
    from fuzzpy.typesystem.ir import IPrim, IVar

    body = IPrim("add", [IVar("x"), IVar("y")], {})
    code, free = C.body_function(body, ("x",))
    assert free == frozenset({"y"})
    state = RunState(RandomSource.seeded(0))
    it = Interpreter(state)
    assert code(it, state, {"y": F(2), "x": F(100)}, F(1)) == 3  # the parameter, not the captured x
    from fuzzpy.runtime.values import Closure

    assert it.apply(Closure({"y": F(5)}, ["x"], body), [F(1)]) == 6
    with pytest.raises(RunFailure, match="'y' is not bound"):  # the interpreter's own error
        it.apply(Closure({}, ["x"], body), [F(1)])
    assert C.body_function(body, ("x", "y"))[1] == frozenset()  # the same body, other parameters


# ---- lifetime ------------------------------------------------------------------------------------------

def test_compiled_code_lives_as_long_as_its_program():
    """Code is kept on the instances and nodes it translates: once a caller drops a checked
    program it ran (a service running many programs), the program and its code are freed."""
    import gc
    import weakref

    def run_one():
        entry = check("sample a = noisy db; sample xs = per_key db; sample s = spread db 1; return (a, lsum xs, s)",
                      "fuzzy (num, num, num)", EFFECTS)
        assert run_labelled(entry, True)[0] == "ok"
        assert C.effectful_function(entry) is not None
        return [weakref.ref(n) for n in I.reachable(entry) if isinstance(n, I.Instance)]

    refs = [r for _ in range(3) for r in run_one()]
    gc.collect()
    assert len(refs) >= 15 and [r() for r in refs if r() is not None] == []


def test_a_node_with_compiled_code_pickles_without_it():
    """Row functions travel to the Dask engine's workers by pickle: the code kept on their nodes
    (which no worker could unpickle) stays behind."""
    import pickle

    entry = check("sample xs = per_key db; return (lsum xs)", "fuzzy num", EFFECTS)
    assert run_labelled(entry, True)[0] == "ok"
    found = instances(entry)
    per_key = found["per_key"]
    assert any(k.startswith(I.RUNTIME_CACHE) for k in vars(per_key))
    copy = pickle.loads(pickle.dumps(per_key))
    assert not any(k.startswith(I.RUNTIME_CACHE) for k in vars(copy))
    assert copy.name == "per_key" and copy.params == per_key.params
    bodies = [n for n in I.reachable(entry) if any(k.startswith(I.RUNTIME_CACHE) for k in vars(n))
              and not isinstance(n, I.Instance)]
    assert bodies  # a lambda's body, compiled when `each` applied it
    assert not any(k.startswith(I.RUNTIME_CACHE) for k in vars(pickle.loads(pickle.dumps(bodies[0]))))

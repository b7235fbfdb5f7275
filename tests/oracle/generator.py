"""Random fuzzpy programs for the soundness oracle, generated type-directed.

A program is a fixed schema (one or two private tables), a few top-level helper functions and an
entry point `main`.  Helpers come from shapes that exercise what a checker can get wrong
(recursion over public and released counters, over private values, over constant lists and list
patterns, closures handed to recursive and non-recursive higher-order functions, type variables,
partitions, sequences of releases, partial applications, function values given a declared
sensitivity, curried functions of a declared type that release, partially applied and completed
through lets, branches, declared parameters and returns, closures returned through two functions,
branches on discrete parameters around a recursion that may not finish), with their bodies and arguments filled in by a typed
expression generator that covers the rest of the language (let and tuple patterns, with-pairs,
records, sums and case, lists, bag primitives, partitions, clip, arithmetic, comparisons, every
mechanism).  `main` is a sequence of lets and samples ending in a distribution.

Generation only asks the chooser for small integers, and option 0 is always the simplest, so a
shrunk choice sequence gives a short program.  Most programs are well typed; the checker rejects
some (an infinite sensitivity, a private branch), and those are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .choices import Chooser, coin, pick, weighted

SCHEMA_P = 'schema P { age : num[0, 100], sex : cat{"M", "F"}, ok : bool, n : int[0, 5] }'
SCHEMA_Q = 'schema Q { v : num[-10, 10], tag : cat{"x", "y"} }'
KEYS = {"sex": ['"M"', '"F"'], "n": [f'"{i}"' for i in range(6)]}

EPSILONS = ["1", "0.5", "2", "0.1"]
# A program's theme: "any" leaves everything to chance; the others put one shape a checker can
# get wrong (a closure used once per iteration, a loop of releases, a type-variable return, a
# list recursion, a release inside a helper, a discarded hazard, a curried function of a declared
# type partially applied) at the heart of main.
THEMES = [(5, "any"), (2, "fold"), (1, "loop"), (1, "longloop"), (2, "tvar"), (1, "lfold"), (1, "genrec"),
          (1, "mechfn"), (2, "discard"), (1, "curried"), (2, "rejects")]
THEME_SHAPES = {"fold", "loop", "longloop", "tvar", "lfold", "genrec", "mechfn", "curried", "rejects"}
# The shapes of the false rejects of issue 37, each accepted by a rule of its own: what each/pmap's
# function captures paid once per part, functions taken out of tuples, records and lists, loops
# counting up to a public bound (or with a closure before the guard), closures in recursions of
# released length.
REJECT_SHAPES = ["each_capture", "pmap_capture", "container", "count_up", "released_closure"]
SMALL = ["0", "1", "2", "3", "5", "10", "100"]
# Counters that run past the checker's unrolling (256 nested instances) as well as small ones.
LONG_COUNTS = ["260", "300", "400", "1000"]
SHORT_COUNTS = ["0", "1", "2", "3", "5", "12", "40"]

# Generator types: "num", "bool", "bag" (bag P), "bagq" (bag Q), "pair" (num, num),
# "wpair" (|num, num|), "rec" {a : num, b : num}, "sum" (num + num), "list" (list num),
# "parts:sex" / "parts:n" (partitions of bag P), "nparts:sex" / "nparts:n" (parts of numbers),
# "fn" (a num -> num function value), "lbool" (list bool), "fuzzy" (a distribution).
TYPE_TEXT = {"num": "num", "bool": "bool", "bag": "bag P", "bagq": "bag Q", "pair": "(num, num)",
             "wpair": "(|num, num|)", "rec": "{ a : num, b : num }", "sum": "num + num", "list": "list num"}


@dataclass
class Var:
    name: str
    ty: str
    public: bool


@dataclass
class Helper:
    """A top-level function and how to call it: `call(gen, env, depth)` gives the text of a call."""

    name: str
    ret: str                       # generator type of the result ("num", "fuzzy", ...)
    call: Callable[["ProgramGen", list, int], str]
    needs_bag: bool = False        # its arguments read a bag of P (only where one is in scope)


@dataclass
class Program:
    text: str
    tables: list[str]              # the entry point's private inputs ("db", "db2")
    theme: str = "any"             # the shape at the heart of main (see THEMES)


def paren(e: str) -> str:
    return e if _atomic(e) else f"({e})"


def _atomic(e: str) -> bool:
    if e.startswith("(") and e.endswith(")"):
        depth = 0
        for i, c in enumerate(e):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(e) - 1:
                return False
        return True
    return all(c.isalnum() or c in "_.\"" for c in e) or (e.startswith("[") and e.endswith("]"))


class ProgramGen:
    def __init__(self, ch: Chooser):
        self.ch = ch
        self.count = 0
        self.decls: list[str] = []
        self.helpers: list[Helper] = []
        self.prelude: Optional[list[str]] = None  # main's statements to emit before the current one
        self.main_env: list[Var] = []
        self.theme = "any"
        self.theme_helper: Optional[Helper] = None
        self.focused = False
        self.made: dict[str, str] = {}  # lazily made helpers (partial, per part, mk, spin, branch): kind -> name
        self.making = False               # inside the body of a lazily made helper (no nesting of them)

    # ---- names and small pieces ------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def eps(self) -> str:
        return pick(self.ch, EPSILONS)

    def lit(self) -> str:
        return pick(self.ch, SMALL)

    def vars(self, env: list[Var], ty: str, public: bool = False) -> list[Var]:
        return [v for v in env if v.ty == ty and (v.public or not public)]

    def has_bag(self, env: list[Var]) -> bool:
        return any(v.ty == "bag" for v in env)

    def callable(self, env: list[Var], ret: str) -> list[Helper]:
        bag = self.has_bag(env)
        return [h for h in self.helpers if h.ret == ret and (bag or not h.needs_bag)]

    # ---- programs ----------------------------------------------------------------------------------

    def program(self) -> Program:
        tables = ["db", "db2"] if coin(self.ch, 15) else ["db"]
        self.theme = weighted(self.ch, THEMES)
        if self.theme in THEME_SHAPES:
            getattr(self, "make_" + self.theme)()
            self.theme_helper = self.helpers[-1]
        for _ in range(weighted(self.ch, [(2, 0), (4, 1), (3, 2), (1, 3)])):
            self.helper()
        env = [Var("db", "bag", False)] + ([Var("db2", "bagq", False)] if len(tables) > 1 else [])
        body = self.main_body(env)
        params = " ".join(f"({t} : bag {'P' if t == 'db' else 'Q'})" for t in tables)
        schemas = [SCHEMA_P] + ([SCHEMA_Q] if len(tables) > 1 else [])
        main = f"function main {params} {{\n{body}\n}}"
        return Program("\n".join(schemas + self.decls + [main]) + "\n", tables, self.theme)

    def main_body(self, env: list[Var]) -> str:
        self.prelude = []
        self.main_env = env
        lines: list[str] = []
        themed = self.theme != "any"
        counts = [(3, 0), (3, 1), (2, 2), (1, 3)] if themed else [(2, 0), (3, 1), (3, 2), (2, 3), (1, 5)]
        for _ in range(weighted(self.ch, counts)):
            stmt, new = self.statement(self.main_env, 3)
            lines += [f"  {s};" for s in self.prelude] + ([f"  {stmt};"] if stmt else [])
            self.prelude = []
            self.main_env = self.main_env + new
        final = self.theme_final(self.main_env, 3) if themed and not coin(self.ch, 25) else self.fuzzy(self.main_env, 3)
        lines += [f"  {s};" for s in self.prelude] + [f"  {final}"]
        self.prelude = None
        return "\n".join(lines)

    def theme_final(self, env: list[Var], d: int) -> str:
        """main's last expression built around the program's theme: a release of the themed
        helper's result, or a discarded hazard."""
        if self.theme == "discard":
            kind = pick(self.ch, ["return", "laplace", "sample"])
            hidden = self.discard(env, d)
            if kind == "laplace":
                return f"laplace {self.eps()} {paren(hidden)}"
            if kind == "sample":
                return f"sample {self.fresh('s')} = laplace {self.eps()} {paren(self.private_num(env, d))}; return {paren(hidden)}"
            return f"return {paren(hidden)}"
        self.focused = True  # the helper's arguments take their sharpest forms
        call = self.theme_helper.call(self, env, d)
        self.focused = False
        if self.theme_helper.ret == "fuzzy":
            return call
        # A result proven 0-sensitive may be returned as it is: the same promise, kept or not.
        return f"return {paren(call)}" if coin(self.ch, 20) else f"laplace {self.eps()} {paren(call)}"

    def statement(self, env: list[Var], d: int) -> tuple[Optional[str], list[Var]]:
        """One statement of main (without its `;`) and the variables it binds."""
        kind = weighted(self.ch, [(8, "sample"), (6, "let_num"), (4, "sample_counter"), (2, "split"),
                                  (2, "groupby"), (2, "let_bag"), (2, "let_value"), (2, "let_fn"),
                                  (2, "discard"), (2, "let_apply")])
        if kind == "sample":
            stmt, var = self.sample_statement(env, d)
            return stmt, [var]
        if kind == "sample_counter":
            self.released_counter()  # goes to the prelude, and into main_env
            return None, []
        if kind == "let_num":
            x = self.fresh("x")
            public = coin(self.ch, 30)
            return f"let {x} = {self.num(env, d, public)}", [Var(x, "num", public)]
        if kind == "split":
            a, b = self.fresh("lo"), self.fresh("hi")
            src = self.bag(env, d - 1)
            bound = self.around(env, d, f"split (fun r -> {self.row_pred(env)}) {paren(src)}")
            return f"let ({a}, {b}) = {bound}", [Var(a, "bag", False), Var(b, "bag", False)]
        if kind == "groupby":
            g = self.fresh("g")
            key = pick(self.ch, ["sex", "n"])
            bound = self.around(env, d, f"groupby (fun r -> r.{key}) {paren(self.bag(env, d - 1))}")
            return f"let {g} = {bound}", [Var(g, f"parts:{key}", False)]
        if kind == "let_bag":
            b = self.fresh("b")
            return f"let {b} = {self.bag(env, d)}", [Var(b, "bag", False)]
        if kind == "let_value":
            ty = pick(self.ch, ["pair", "rec", "sum", "list", "wpair"])
            x = self.fresh("v")
            return f"let {x} = {self.value(ty, env, d)}", [Var(x, ty, False)]
        if kind == "let_fn":
            f = self.fresh("f")
            return f"let {f} = {self.closure(env, d)}", [Var(f, "fn", False)]
        if kind == "let_apply":  # a function value bound now and applied later: `let g = f a; let x = g b`
            g, x = self.fresh("g"), self.fresh("x")
            fv = self.fn_value(env, d, private=self.has_bag(env) and not coin(self.ch, 30))
            arg = self.num(env, d - 1, public=not coin(self.ch, 30))
            return f"let {g} = {fv}; let {x} = {g} {paren(arg)}", [Var(g, "fn", False), Var(x, "num", False)]
        z = self.fresh("z")
        return f"let {z} = {self.hazard(env, d)}", []

    def around(self, env: list[Var], d: int, bound: str) -> str:
        """`bound`, sometimes computed after a discarded hazard: (let z = hazard; bound)."""
        if not coin(self.ch, 25):
            return bound
        return f"(let {self.fresh('z')} = {self.hazard(env, d - 1)}; {bound})"

    def sample_statement(self, env: list[Var], d: int) -> tuple[str, Optional[Var]]:
        x = self.fresh("s")
        mech, ty = self.mechanism(env, d)
        return f"sample {x} = {mech}", Var(x, ty, True)

    def sharp(self) -> bool:
        """In a themed call: take the form most likely to expose a wrong rule (mostly)."""
        return self.focused and not coin(self.ch, 20)

    def released_counter(self, counts: Optional[list[str]] = None) -> Optional[Var]:
        """`sample k = laplace eps C` in main: a public value, exactly C under the identity."""
        if self.prelude is None:
            return None
        k = self.fresh("k")
        if counts is not None:
            c = pick(self.ch, counts)
        else:
            c = pick(self.ch, SHORT_COUNTS) if not coin(self.ch, 20) else pick(self.ch, LONG_COUNTS)
        self.prelude.append(f"sample {k} = laplace {self.eps()} {c}")
        v = Var(k, "num", True)
        self.main_env = self.main_env + [v]
        return v

    # ---- numbers -------------------------------------------------------------------------------------

    def num(self, env: list[Var], d: int, public: bool = False) -> str:
        """A number; `public`: one that reads no private data (it may be returned or branched on)."""
        vs = self.vars(env, "num", public)
        bag = self.has_bag(env) and not public
        if d <= 0:
            options = [(2, "lit")] + ([(3, "var")] if vs else []) + ([(2, "count")] if bag else [])
        else:
            options = [(2, "lit"), (3 if vs else 0, "var"), (3 if bag else 0, "count"), (1 if bag else 0, "sum"),
                       (3, "arith"), (1, "clip"), (1, "if"), (1, "proj"), (1, "field"), (1, "case"), (1, "let"),
                       (3, "call"), (1, "apply"), (1, "minmax"), (0 if public else 1, "discard"), (1, "letpair")]
        kind = weighted(self.ch, [o for o in options if o[0] > 0])
        out = getattr(self, "_num_" + kind)(env, d, public)
        return out if out is not None else self.lit()

    def _num_lit(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return self.lit()

    def _num_var(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return pick(self.ch, self.vars(env, "num", public)).name

    def _num_count(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return f"count {paren(self.bag(env, d - 1))}"

    def _num_sum(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return f"sum (map (fun r -> {self.row_num()}) {paren(self.bag(env, d - 1))})"

    def _num_arith(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        op = pick(self.ch, ["+", "-", "*", "/", "c*"])
        a, b = self.num(env, d - 1, public), self.num(env, d - 1, public)
        if op == "c*":
            return f"{self.lit()} * {paren(a)}"
        if op == "/":
            return f"{paren(a)} / {pick(self.ch, ['2', '10', '1000'])}"
        return f"{paren(a)} {op} {paren(b)}"

    def _num_clip(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        lo, hi = pick(self.ch, [("0", "1"), ("0", "10"), ("0", "0"), ("0", "100"), ("1", "5")])
        return f"clip {lo} {hi} {paren(self.num(env, d - 1, public))}"

    def _num_if(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        cond = self.boolean(env, d - 1, public=not coin(self.ch, 10))  # rarely a private branch
        return f"if {cond} then {self.num(env, d - 1, public)} else {self.num(env, d - 1, public)}"

    def _num_proj(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        pair = self.value(pick(self.ch, ["pair", "wpair"]), env, d - 1, public)
        return f"{paren(pair)}.{pick(self.ch, ['1', '2'])}"

    def _num_field(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return f"{paren(self.value('rec', env, d - 1, public))}.{pick(self.ch, ['a', 'b'])}"

    def _num_case(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        s = self.value("sum", env, d - 1, public)
        x, y = self.fresh("l"), self.fresh("r")
        e1 = self.num(env + [Var(x, "num", public)], d - 1, public)
        e2 = self.num(env + [Var(y, "num", public)], d - 1, public)
        return f"case {paren(s)} of {{ inl {x} => {e1} | inr {y} => {e2} }}"

    def _num_let(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        x = self.fresh("t")
        bound = self.num(env, d - 1, public)
        return f"let {x} = {bound}; {self.num(env + [Var(x, 'num', public)], d - 1, public)}"

    def _num_letpair(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        a, b = self.fresh("p"), self.fresh("q")
        pat, ty = pick(self.ch, [("({a}, {b})", "pair"), ("(|{a}, {b}|)", "wpair")])
        bound = self.value(ty, env, d - 1, public)
        inner = env + [Var(a, "num", public), Var(b, "num", public)]
        return f"let {pat.format(a=a, b=b)} = {bound}; {self.num(inner, d - 1, public)}"

    def _num_call(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        hs = self.callable(env, "num")
        return pick(self.ch, hs).call(self, env, d - 1) if hs else None

    def _num_apply(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        fs = self.vars(env, "fn")
        f = pick(self.ch, fs).name if fs else paren(self.closure(env, d - 1))
        return f"{f} {paren(self.num(env, d - 1, public))}"

    def _num_minmax(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        op = pick(self.ch, ["max", "min", "abs"])
        if op == "abs":
            return f"abs {paren(self.num(env, d - 1, public))}"
        return f"{op} {paren(self.num(env, d - 1, public))} {paren(self.num(env, d - 1, public))}"

    def _num_discard(self, env: list[Var], d: int, public: bool) -> Optional[str]:
        return self.discard(env, d)

    def boolean(self, env: list[Var], d: int, public: bool = False) -> str:
        ch = self.ch
        bs = self.vars(env, "bool", public)
        kind = weighted(ch, [(1, "lit"), (4, "cmp"), (1 if bs else 0, "var"), (1 if d > 0 else 0, "not"),
                             (1 if d > 0 else 0, "and")])
        if kind == "var":
            return pick(ch, bs).name
        if kind == "cmp":
            op = pick(ch, ["<=", "<", ">", ">=", "==", "!="])
            return f"{paren(self.num(env, d - 1, public))} {op} {paren(self.num(env, d - 1, public))}"
        if kind == "not":
            return f"!{paren(self.boolean(env, d - 1, public))}"
        if kind == "and":
            op = pick(ch, ["&&", "||"])
            return f"{paren(self.boolean(env, d - 1, public))} {op} {paren(self.boolean(env, d - 1, public))}"
        return pick(ch, ["true", "false"])

    # ---- what a private computation can hide in: discarded values ---------------------------------

    def hazard(self, env: list[Var], d: int) -> str:
        """A private number that may be costly or fail depending on the data: a recursion as deep
        as a count, a comparison of private values, or any private expression."""
        ch = self.ch
        kind = weighted(ch, [(8, "deep"), (2, "cmp"), (2, "any"), (1, "branch")])
        if kind == "branch":
            return self.branch_call(env, d)
        if kind == "deep":
            return self.deep_call(env, d, private=self.has_bag(env) and not coin(ch, 20))
        if kind == "cmp":
            return f"if {self.boolean(env, d - 1)} then 1 else 0"
        return self.num(env, d - 1)

    def discard(self, env: list[Var], d: int) -> str:
        """A number that computes a hazard and throws it away."""
        ch = self.ch
        h = self.hazard(env, d - 1)
        keep = self.num(env, d - 2, public=coin(ch, 60))
        form = weighted(ch, [(3, "proj"), (1, "zero"), (1, "let"), (1, "wproj"), (1, "letpair"), (1, "zerobound"),
                             (1, "ign"), (1, "tuple3"), (1, "field"), (2, "letaround")])
        if form == "field":
            return f"{{ a = {paren(h)}, b = {paren(keep)} }}.b"
        if form == "letaround":  # the hazard inside the bound of a pattern let
            z, a, b = self.fresh("z"), self.fresh("u"), self.fresh("w")
            return f"let ({a}, {b}) = (let {z} = {h}; ({paren(keep)}, 1)); {a}"
        if form == "proj":
            return f"({h}, {keep}).2"
        if form == "zero":
            return f"0 * {paren(h)}"
        if form == "let":
            z = self.fresh("z")
            return f"let {z} = {h}; {keep}"
        if form == "wproj":
            return f"(|{h}, {keep}|).2"
        if form == "letpair":
            a, b = self.fresh("u"), self.fresh("w")
            return f"let ({a}, {b}) = ({h}, {keep}); {b}"
        if form == "zerobound":
            return f"{paren(h)} * (clip 0 0 {paren(self.num(env, 0, public=True))})"
        if form == "tuple3":
            return f"(({h}, {paren(self.private_num(env, 1)) if self.has_bag(env) else '1'}), {keep}).2"
        return f"{self.ignore_helper()} {paren(h)} {paren(keep)}"

    def ignore_helper(self) -> str:
        for h in self.helpers:
            if h.name.startswith("ign"):
                return h.name
        name = self.fresh("ign")
        typed = pick(self.ch, ["(x : num) (y : num) : num", "x y", "(x : 'a) (y : num) : num"])
        self.decls.append(f"function {name} {typed} {{ y }}")
        self.helpers.append(Helper(name, "none", lambda g, env, d: "0"))
        return name

    def deep_call(self, env: list[Var], d: int, private: bool = False) -> str:
        """A call of a recursion as deep as its argument; `private`: on a private number."""
        deep = next((h for h in self.helpers if h.name.startswith("deep")), None)
        if deep is None:
            deep = self.make_deep()
        if private:
            return f"{deep.name} {paren(self.private_num(env, d))}"
        return deep.call(self, env, d)

    # ---- bags, partitions -----------------------------------------------------------------------------

    def bag(self, env: list[Var], d: int, which: str = "bag") -> str:
        ch = self.ch
        vs = self.vars(env, which)
        base = pick(ch, vs).name if vs else ("db" if which == "bag" else "db2")
        if which == "bagq" or d <= 0:
            if which == "bagq" and d > 0 and coin(ch, 30):
                return f"filter (fun r -> r.v < {pick(ch, ['0', '5', '-3'])}) {base}"
            return base
        kind = weighted(ch, [(4, "var"), (2, "filter"), (1, "union"), (1, "split"), (1, "part"),
                             (1, "head"), (1, "sorted")])
        if kind == "filter":
            return f"filter (fun r -> {self.row_pred(env)}) {paren(self.bag(env, d - 1))}"
        if kind == "union":
            return f"union {paren(self.bag(env, d - 1))} {paren(self.bag(env, d - 1))}"
        if kind == "split":
            return f"(split (fun r -> {self.row_pred(env)}) {paren(self.bag(env, d - 1))}).{pick(ch, ['1', '2'])}"
        if kind == "part":
            ps = [v for v in env if v.ty.startswith("parts:")]
            if ps:
                p = pick(ch, ps)
                key = pick(ch, KEYS[p.ty.split(":")[1]])
                return f"{p.name}.M" if key == '"M"' and coin(ch, 50) else f"part {p.name} {key}"
            key = pick(ch, ["sex", "n"])
            return f"part (groupby (fun r -> r.{key}) {paren(self.bag(env, d - 1))}) {pick(ch, KEYS[key])}"
        if kind == "head":
            return f"head {pick(ch, ['1', '3', '10'])} (sort_by (fun r -> r.age) {paren(self.bag(env, d - 1))})"
        if kind == "sorted":
            return f"slice 1 {pick(ch, ['2', '5'])} (sort_by (fun r -> r.n) {paren(self.bag(env, d - 1))})"
        return base

    def parts(self, env: list[Var], d: int) -> tuple[str, str]:
        ps = [v for v in env if v.ty.startswith("parts:")]
        if ps and coin(self.ch, 70):
            p = pick(self.ch, ps)
            return p.name, p.ty.split(":")[1]
        key = pick(self.ch, ["sex", "n"])
        return f"groupby (fun r -> r.{key}) {paren(self.bag(env, d - 1))}", key

    def row_pred(self, env: list[Var]) -> str:
        ch = self.ch
        pub = self.vars(env, "num", public=True)
        kind = pick(ch, ["age", "ok", "sex", "n", "not", "captured", "and"])
        if kind == "age":
            return f"r.age < {pick(ch, ['18', '50', '0', '100'])}"
        if kind == "ok":
            return "r.ok"
        if kind == "sex":
            return f'r.sex == {pick(ch, KEYS["sex"])}'
        if kind == "n":
            return f"r.n >= {pick(ch, ['1', '3', '5'])}"
        if kind == "not":
            return "!r.ok"
        if kind == "captured":  # a released value is public: capturing it is free
            cap = pick(ch, pub).name if pub else pick(ch, ["20", "60"])
            return f"r.age <= {cap}"
        return f"r.ok && r.age > {pick(ch, ['10', '40'])}"

    def row_num(self) -> str:
        return pick(self.ch, ["clip 0 10 r.age", "r.age", "r.n", "if r.ok then 1 else 0", "clip 0 1 (r.age / 50)",
                              "2 * r.n", "bin 10 r.age", "floor (r.age / 3)"])

    # ---- other values ----------------------------------------------------------------------------------

    def value(self, ty: str, env: list[Var], d: int, public: bool = False) -> str:
        ch = self.ch
        vs = self.vars(env, ty, public)
        if vs and coin(ch, 40):
            return pick(ch, vs).name
        n = lambda: self.num(env, d - 1, public)  # noqa: E731
        if ty == "pair":
            if coin(ch, 15):
                return f"cswap ({paren(n())}, {paren(n())})"
            return f"({paren(n())}, {paren(n())})"
        if ty == "wpair":
            return f"(|{paren(n())}, {paren(n())}|)"
        if ty == "rec":
            return f"{{ a = {paren(n())}, b = {paren(n())} }}"
        if ty == "sum":
            side = pick(ch, ["inl", "inr"])
            return f"({side} {paren(n())} : num + num)"
        if ty == "list":
            bag = self.has_bag(env) and not public
            kind = weighted(ch, [(9, "lit"), (3, "cons"), (3 if bag else 0, "values"), (1 if bag else 0, "pmap_partial"),
                                 (1, "take"), (1 if public else 0, "sort")])
            if kind == "take":  # 1-sensitive on any list
                return f"take {pick(ch, ['0', '1', '2'])} (reverse {paren(self.value('list', env, d - 1, public))})"
            if kind == "sort":  # public lists only
                return f"sort {paren(self.value('list', env, d - 1, public))}"
            if kind == "cons":
                return f"{paren(n())} :: {paren(self.value('list', env, d - 1, public))}"
            if kind == "pmap_partial":  # a partial application given to pmap
                p, _ = self.parts(env, d)
                return f"values (pmap {paren(self.part_partial(env, d, 'num'))} {paren(p)})"
            if kind == "values":
                p, _ = self.parts(env, d)
                return f"values (pmap (fun p -> count p) {paren(p)})"
            return "[" + ", ".join(paren(n()) for _ in range(weighted(ch, [(1, 0), (3, 1), (3, 2), (2, 3)]))) + "]"
        raise ValueError(ty)

    def closure(self, env: list[Var], d: int, private: bool = False) -> str:
        """A num -> num function value, often (`private`: always) capturing private data; rarely a
        partial application, an ascribed function or a closure returned by a function."""
        if not self.making and coin(self.ch, 8):
            return self.fn_value(env, d, private)
        x = self.fresh("y")
        head = pick(self.ch, [f"fun {x} ->", f"fun ({x} : num) ->"])
        inner = env + [Var(x, "num", True)]
        if self.has_bag(env) and (private or coin(self.ch, 50)):
            return f"{head} {self.private_num(inner, d)}"
        return f"{head} {self.num(inner, d)}"

    def private_num(self, env: list[Var], d: int) -> str:
        """A number that moves with the data (a count or a clipped sum, maybe scaled)."""
        ch = self.ch
        kind = pick(ch, ["count", "sum", "scaled", "plus"])
        if kind == "sum":
            return f"sum (map (fun r -> {self.row_num()}) {paren(self.bag(env, d - 1))})"
        count = f"count {paren(self.bag(env, d - 1))}"
        if kind == "scaled":
            return f"{pick(ch, ['2', '10', '0.5'])} * {count}"
        if kind == "plus":
            return f"{count} + {paren(self.num(env, d - 1))}"
        return count

    # ---- distributions and mechanisms ----------------------------------------------------------------

    def mechanism(self, env: list[Var], d: int, num_only: bool = False) -> tuple[str, str]:
        """A mechanism call and the generator type of the value it releases (a number only, with
        `num_only`: the two branches of an `if` must have one type)."""
        ch = self.ch
        other = 0 if num_only else 1
        bag = self.has_bag(env)
        kind = weighted(ch, [(18, "laplace"), (3 * other, "laplace2"), (3, "exponential"), (3, "noisy_max"),
                             (6, "gaussian"), (2 * other, "gaussian2"),
                             (3 * other, "svt"), (3 * other, "rr"), (3 * other if bag else 0, "each"),
                             (6, "loop"), (other if bag else 0, "each_partial")])
        if kind == "laplace2":
            return f"laplace {self.eps()} ({self.num(env, d - 1)}, {self.num(env, d - 1)})", "pair"
        if kind == "gaussian2":
            return f"gaussian {self.eps()} ({self.num(env, d - 1)}, {self.num(env, d - 1)})", "pair"
        if kind == "gaussian":
            hs = self.callable(env, "num")
            arg = pick(ch, hs).call(self, env, d - 1) if hs and coin(ch, 40) else self.num(env, d - 1)
            return f"gaussian {self.eps()} {paren(arg)}", "num"
        if kind in ("exponential", "noisy_max"):
            c = self.fresh("c")
            cands = pick(ch, ["[1, 2, 3]", "[0, 50, 100]", "[5]", "(range 0 100 50)", "(range 1 3 1)"])
            score = self.score(env + [Var(c, "num", True)], d - 1, c)
            return f"{kind} {self.eps()} {cands} (fun {c} -> {score})", "num"
        if kind == "svt":
            q = self.fresh("q")
            score = self.score(env + [Var(q, "num", True)], d - 1, q)
            cut, thr = pick(ch, ["1", "2"]), pick(ch, ["0", "3", "10"])
            return f"above_threshold {self.eps()} {cut} {thr} [1, 2, 3] (fun {q} -> {score})", "lbool"
        if kind == "rr":
            return f"randomized_response {self.eps()} {paren(self.boolean(env, d - 1))}", "bool"
        if kind == "each_partial":  # a partial application given to each
            p, key = self.parts(env, d)
            return f"each {paren(self.part_partial(env, d, 'fuzzy'))} {paren(p)}", f"nparts:{key}"
        if kind == "each":
            p, key = self.parts(env, d)
            body = pick(ch, ["laplace {e} (count p)", "laplace {e} (sum (map (fun r -> clip 0 10 r.age) p))",
                             "sample t = laplace {e} (count p); return (t + 1)", "gaussian {e} (count p)",
                             "sample t = gaussian {e} (sum (map (fun r -> clip 0 10 r.age) p)); "
                             "sample u = laplace {e} (count p); return (t + u)",
                             # a tree's leaf: each part grouped again, its groups counted (the parts of
                             # a part, sized from their siblings' cells)
                             'let k = groupby (fun r -> r.sex) p; sample c = laplace {e} (count (part k "M"), '
                             'count (part k "F")); let (m, f) = c; return (m - f)',
                             'laplace {e} (count (part (groupby (fun r -> r.n) p) "2"))',
                             "node"])
            if body == "node":  # a tree's node: a selection scoring the part's groupings by key
                score = self.by_key_score([Var("p", "bag", False)], d, "x")
                body = f"exponential {self.eps()} [1, 2, 3] (fun x -> {score})"
            else:
                body = body.format(e=self.eps())
            return f"each (fun p -> {body}) {paren(p)}", f"nparts:{key}"
        if kind == "loop":
            hs = self.callable(env, "fuzzy")
            if hs:
                return pick(ch, hs).call(self, env, d - 1), "num"
        hs = self.callable(env, "num")
        if hs and coin(ch, 40):  # a helper's result released directly: its sensitivity is on trial
            return f"laplace {self.eps()} {paren(pick(ch, hs).call(self, env, d - 1))}", "num"
        return f"laplace {self.eps()} {paren(self.num(env, d - 1))}", "num"

    def score(self, env: list[Var], d: int, c: str) -> str:
        kind = pick(self.ch, ["count_filter", "num", "diff", "by_key"] if self.has_bag(env) else ["num", "diff"])
        if kind == "count_filter":
            return f"count (filter (fun r -> r.age <= {c}) {paren(self.bag(env, d - 1))})"
        if kind == "by_key":
            return self.by_key_score(env, d, c)
        if kind == "diff":
            return f"0 - abs ({c} - {paren(self.num(env, d - 1))})"
        return self.num(env, d)

    def fuzzy(self, env: list[Var], d: int, num_only: bool = False) -> str:
        """A distribution: a mechanism, a return, a sample, a public branch (num_only: of fuzzy num)."""
        ch = self.ch
        kind = weighted(ch, [(5, "mech"), (3, "return"), (1, "sample"), (1 if d > 0 else 0, "if"),
                             (0 if num_only else 1, "return_pair"), (1, "return_discard")])
        if kind == "return":
            return f"return {paren(self.num(env, d - 1, public=not coin(ch, 10)))}"
        if kind == "return_pair":
            pub = [v for v in env if v.public]
            items = [pick(ch, pub).name if pub and coin(ch, 70) else self.num(env, d - 1, public=True) for _ in range(2)]
            return f"return ({items[0]}, {items[1]})"
        if kind == "return_discard":
            return f"return {paren(self.discard(env, d))}"
        if kind == "sample":
            stmt, var = self.sample_statement(env, d - 1)
            return f"{stmt}; {self.fuzzy(env + [var] if var else env, d - 1, num_only)}"
        if kind == "if":
            return (f"if {self.boolean(env, d - 1, public=not coin(ch, 10))} "
                    f"then {paren(self.fuzzy(env, d - 1, True))} else {paren(self.fuzzy(env, d - 1, True))}")
        return self.mechanism(env, d, num_only)[0]

    # ---- helper functions --------------------------------------------------------------------------

    def helper(self) -> None:
        shape = weighted(self.ch, [(3, "fold"), (3, "loop"), (2, "tvar"), (2, "deep"), (2, "lfold"), (2, "hof"),
                                   (2, "plain"), (1, "cdf"), (1, "bagloop"), (2, "genrec"), (1, "mechfn"),
                                   (1, "curried"), (1, "rejects")])
        getattr(self, "make_" + shape)()

    # ---- the false rejects of issue 37 -------------------------------------------------------------

    def make_rejects(self) -> None:
        """One of REJECT_SHAPES, as a helper whose call releases (ret "fuzzy", a number)."""
        shape = pick(self.ch, REJECT_SHAPES)
        getattr(self, "_reject_" + shape)()

    def _captured_bag(self, g: "ProgramGen", env: list[Var], d: int) -> str:
        """The table a per-part function captures: main's table, or a bag expression over it."""
        return g.bag(env, d - 1) if coin(g.ch, 40) else "db"

    def _reject_each_capture(self) -> None:
        """`each (fun p -> ...)` whose function also reads a captured table: once per part."""
        name = self.fresh("ecap")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            ch = g.ch
            key = pick(ch, ["sex", "n"])
            cap = paren(self._captured_bag(g, env, d))
            body = pick(ch, ["laplace {e} (count {c})", "laplace {e} (count p + count {c})",
                             "sample a = laplace {e} (count {c}); laplace {e} (count {c} + count p)",
                             "laplace {e} (count p + 2 * count {c})", "gaussian {e} (count {c})",
                             "laplace {e} (count {c} + count (part {ps} {k}))"])
            ps = g.fresh("ps")
            body = body.format(e=g.eps(), c=cap, ps=ps, k=pick(ch, KEYS[key]))
            h = g.fresh("h")
            return (f"(let {ps} = groupby (fun r -> r.{key}) {paren(g.bag(env, d - 1))}; "
                    f"sample {h} = each (fun p -> {body}) {ps}; return (part {h} {pick(ch, KEYS[key])}))")

        self.helpers.append(Helper(name, "fuzzy", call, needs_bag=True))

    def _reject_pmap_capture(self) -> None:
        """`pmap (fun p -> ...)` capturing a table, then `values`, summed and released."""
        name = self.fresh("pcap")
        total = self.fresh("ltot")
        self.decls.append(f"function {total} (xs : list num) : num {{ case xs of {{ [] => 0 | h :: t => h + {total} t }} }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            ch = g.ch
            key = pick(ch, ["sex", "n"])
            cap = paren(self._captured_bag(g, env, d))
            f = pick(ch, ["clip 0 1 (count {c})", "clip 0 1 (count p + count {c})", "count {c}",
                          "clip 0 5 (count {c}) + clip 0 1 (count {c})"]).format(c=cap)
            return (f"laplace {g.eps()} ({total} (values (pmap (fun p -> {f}) "
                    f"(groupby (fun r -> r.{key}) {paren(g.bag(env, d - 1))}))))")

        self.helpers.append(Helper(name, "fuzzy", call, needs_bag=True))

    def _reject_container(self) -> None:
        """Functions stored in a tuple, record or list, taken out and applied."""
        name = self.fresh("cont")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            ch = g.ch
            declared = coin(ch, 50)
            fns = []
            for _ in range(2):
                body = pick(ch, ["laplace {e} (count t)", "laplace {e} (count t + count db)",
                                 "laplace {e} (clip 0 5 (count t))", "sample a = laplace {e} (count t); return (a + 1)"])
                lam = f"fun t -> {body.format(e=g.eps())}"
                fns.append(f"({lam} : bag P -o[{pick(ch, ['1', '2', '3'])}] fuzzy num)" if declared else f"({lam})")
            f, h = g.fresh("f"), g.fresh("g")
            arg = paren(g.bag(env, d - 1))
            kinds = ["tuple", "with", "record", "pattern"] + (["list", "branch"] if declared else [])
            kind = pick(ch, kinds)
            pre = f"let {f} = {fns[0]}; let {h} = {fns[1]}; "
            fs = g.fresh("fs")
            if kind == "tuple":
                use = f"let {fs} = ({f}, {h}); {fs}.{pick(ch, ['1', '2'])} {arg}"
            elif kind == "with":
                use = f"let {fs} = (|{f}, {h}|); {fs}.{pick(ch, ['1', '2'])} {arg}"
            elif kind == "record":
                use = f"let {fs} = {{ fit = {f}, other = {h} }}; {fs}.{pick(ch, ['fit', 'other'])} {arg}"
            elif kind == "pattern":
                use = f"let ({fs}, {g.fresh('o')}) = ({f}, {h}); {fs} {arg}"
            elif kind == "list":
                use = f"case [{f}, {h}] of {{ [] => return 0 | x :: rest => x {arg} }}"
            else:  # swapped for another in a branch on a released value
                c = g.fresh("c")
                use = (f"sample {c} = laplace {g.eps()} (count {arg}); "
                       f"let {fs} = if {c} > 3 then ({f}, 0) else ({h}, 0); {fs}.1 {arg}")
            return f"({pre}{use})"

        self.helpers.append(Helper(name, "fuzzy", call, needs_bag=True))

    def _reject_count_up(self) -> None:
        """A loop of releases counting up to a bound (a constant or a parameter passed on), with an
        early stop on a released value, sometimes a closure defined before the guard."""
        ch = self.ch
        name = self.fresh("up")
        param_bound = coin(ch, 50)
        up = coin(ch, 70)
        bound = "m" if param_bound else pick(ch, SHORT_COUNTS + LONG_COUNTS)
        guard = pick(ch, ["i >= {b}", "{b} <= i"] if up else ["i <= {b}", "{b} >= i"]).format(b=bound if up else "0")
        step = f"i {'+' if up else '-'} {pick(ch, ['1', '1', '2'])}"
        closure = coin(ch, 40)
        eps = self.eps()
        release = "f b" if closure else f"laplace {eps} (count b)"
        pre = f"let f = fun t -> laplace {eps} (count t); " if closure else ""
        more = " m" if param_bound else ""
        params = "(i : int)" + (" (m : int)" if param_bound else "") + " (b : bag P)"
        self.decls.append(f"function {name} {params} : fuzzy num {{ {pre}if {guard} then return 0 else "
                          f"(sample v = {release}; if v > {pick(ch, ['3', '50'])} then return v "
                          f"else {name} ({step}){more} b) }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            count = pick(g.ch, SHORT_COUNTS + LONG_COUNTS)
            start, limit = ("0", count) if up else (count, "0")
            if not up and param_bound:
                start, limit = count, "0"
            args = f"{start} {limit}" if param_bound else (start if up else count)
            return f"{name} {args} {paren(g.bag(env, d - 1))}"

        self.helpers.append(Helper(name, "fuzzy", call, needs_bag=True))

    def _reject_released_closure(self) -> None:
        """A recursion whose length is released, with a closure inside (built at each level, or
        passed on), releasing once."""
        ch = self.ch
        name = self.fresh("rcl")
        body = pick(ch, [
            "let inc = fun y -> y + 1; if n <= 0 then clip 0 1 (count b) else {r} (n - 1) b",
            "if n <= 0 then (fun y -> clip 0 1 (count b)) 0 else {r} (n - 1) b",
            "let g = fun y -> clip 0 1 (count b); if n <= 0 then g 0 else {r} (n - 1) b",
            "if n <= 0 then count b else {r} (n - 1) (filter (fun r -> r.age > n) b)",
            "let g = fun y -> clip 0 1 (count b); if n <= 0 then 0 else g 0 - g 0 + {r} (n - 1) b",  # unbounded
        ])
        self.decls.append(f"function {name} (n : num) (b : bag P) : num {{ {body.format(r=name)} }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            return f"laplace {g.eps()} ({name} {paren(g.counter(env, d))} {paren(g.bag(env, d - 1))})"

        self.helpers.append(Helper(name, "fuzzy", call, needs_bag=True))

    def counter(self, env: list[Var], d: int, released: int = 1) -> str:
        """A recursion counter: a small or long public constant, a released value (`released`
        scales its weight), or private.  Sharp: a value released just before, small enough to
        stay under the call-depth limit."""
        ch = self.ch
        if self.sharp() and self.prelude is not None:
            return self.released_counter(["1", "2", "3", "5", "12"]).name  # type: ignore[union-attr]
        kind = weighted(ch, [(3, "short"), (3 * released, "released"), (1, "long"), (2, "private"), (1, "var")])
        if kind == "short":
            return pick(ch, SHORT_COUNTS)
        if kind == "long":
            return pick(ch, LONG_COUNTS)
        if kind == "released":
            pub = self.vars(env, "num", public=True)
            if pub and coin(ch, 50):
                return pick(ch, pub).name
            v = self.released_counter()
            if v is not None:
                return v.name
            return pick(ch, SHORT_COUNTS)
        if kind == "var":
            vs = self.vars(env, "num")
            if vs:
                return pick(ch, vs).name
        return pick(ch, ["count db", "clip 0 5 (count db)", "count (filter (fun r -> r.ok) db)", "2 * count db"]) \
            if any(v.name == "db" for v in env) else self.num(env, d)

    def fn_param(self, name: str) -> str:
        """A function parameter, untyped or of a declared type; rarely a declared sensitivity that
        the function given may exceed."""
        return weighted(self.ch, [(8, name), (8, f"({name} : num -> num)"), (8, f"({name} : num -o num)"),
                                  (8, f"({name})"), (1, f"({name} : num -o[2] num)"),
                                  (1, f"({name} : num -o[0] num)")])

    def make_fold(self) -> None:
        """Recursion handing a closure to itself: the closure's captured distance is used once per
        iteration."""
        ch = self.ch
        name = self.fresh("rep")
        arg = pick(ch, ["0", "n", "1"])
        comb = pick(ch, ["{f} + {r}", "{r} + {f}", "max {pf} {pr}", "{f} + {f} + {r}", "{r} - {f}", "{f} * 2 + {r}"])
        step = pick(ch, ["1", "1", "2"])
        rec = f"{name} f (n - {step})"
        fa = f"f {arg}"
        body = comb.format(f=fa, r=rec, pf=paren(fa), pr=paren(rec))
        self.decls.append(f"function {name} {self.fn_param('f')} (n : num) : num "
                          f"{{ if n <= 0 then {pick(ch, ['0', '1'])} else {body} }}")
        self.helpers.append(Helper(name, "num", lambda g, env, d: (
            f"{name} {paren(g.closure(env, d, g.sharp()))} {paren(g.counter(env, d))}")))

    def make_longloop(self) -> None:
        """A loop of releases, called with a public count past the checker's unrolling (256)."""
        self.make_loop()

    def make_loop(self) -> None:
        """A loop of releases: each iteration samples the closure's distribution."""
        ch = self.ch
        name = self.fresh("loop")
        acc = coin(ch, 40)
        if acc:
            step = f"sample u = f n; sample rest = {name} f (n - 1); return (u + rest)"
        else:
            step = f"sample u = f {pick(ch, ['0', 'n'])}; {name} f (n - 1)"
        fparam = pick(ch, ["f", "(f : num -> fuzzy num)"])
        self.decls.append(f"function {name} {fparam} (n : num) : fuzzy num "
                          f"{{ if n <= 0 then return 0 else ({step}) }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            u = g.fresh("w")
            inner_env = env + [Var(u, "num", True)]
            arg = g.private_num(inner_env, d) if g.has_bag(env) and g.sharp() else g.num(inner_env, d)
            inner = f"laplace {g.eps()} {paren(arg)}"
            # The long-loop theme runs past the checker's unrolling; the others loop a released count.
            counter = pick(g.ch, LONG_COUNTS) if g.theme == "longloop" and g.sharp() else g.counter(env, d)
            return f"{name} (fun {u} -> {inner}) {paren(counter)}"

        self.helpers.append(Helper(name, "fuzzy", call))

    def make_tvar(self) -> None:
        """A recursive function whose return type is a type variable."""
        ch = self.ch
        name = self.fresh("tv")
        base = weighted(ch, [(1, "x"), (3, "100"), (1, "2"), (1, "0")])
        op = weighted(ch, [(3, "*"), (1, "+"), (1, "-")])
        zarg = pick(ch, ["clip 0 1 n", "z", "x"])
        ztype = weighted(ch, [(2, "num[0, 1]"), (1, "num"), (1, "'a")])
        self.decls.append(f"function {name} (n : num) (x : 'a) (z : {ztype}) : 'a "
                          f"{{ if n <= 0 then {base} else ({name} (n - 1) x ({zarg})) {op} z }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            x = weighted(g.ch, [(2, "clip 0 1 {p}"), (1, "{p}"), (1, "clip 0 10 {p}")]).format(
                p=paren(g.num(env, d - 1, public=True)))
            zs = ["clip 0 1 ({e} / 1000)", "clip 0 1 {e}"] + (["{e}"] if ztype != "num[0, 1]" else [])
            sharp = g.sharp() and g.has_bag(env)
            z = (zs[0] if sharp else pick(g.ch, zs)).format(e=paren(g.private_num(env, d - 1) if sharp else g.num(env, d - 1)))
            return f"{name} {paren(g.counter(env, d, released=3))} ({x}) ({z})"

        self.helpers.append(Helper(name, "num", call))

    def make_deep(self) -> Helper:
        """Recursion as deep as its argument: on private data, a data-dependent failure."""
        ch = self.ch
        name = self.fresh("deep")
        step = pick(ch, ["1 + {r}", "{r}", "2 * {r}", "{r} + n"])
        typed = pick(ch, ["(n : num) : num", "(n : num) : num"])
        self.decls.append(f"function {name} {typed} {{ if n <= 0 then 0 else "
                          f"{step.format(r=f'{name} (n - 1)')} }}")
        h = Helper(name, "num", lambda g, env, d: f"{name} {paren(g.counter(env, d))}")
        self.helpers.append(h)
        return h

    def make_lfold(self) -> None:
        """Recursion over a list pattern (the list may hold private numbers)."""
        ch = self.ch
        name = self.fresh("lsum")
        withf = coin(ch, 40)
        fp = f"{self.fn_param('f')} " if withf else ""
        head = "f h" if withf else "h"
        rec = f"{name} {'f ' if withf else ''}t"
        comb = pick(ch, ["{h} + {r}", "max ({h}) ({r})", "{r}", "{h} + {h} + {r}"])
        self.decls.append(f"function {name} {fp}(xs : list num) : num "
                          f"{{ case xs of {{ [] => 0 | h :: t => {comb.format(h=head, r=rec)} }} }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            f = f"{paren(g.closure(env, d, g.sharp()))} " if withf else ""
            if g.has_bag(env) and g.sharp():
                p, _ = g.parts(env, d)
                return f"{name} {f}(values (pmap (fun p -> count p) {paren(p)}))"
            return f"{name} {f}{paren(g.value('list', env, d))}"

        self.helpers.append(Helper(name, "num", call))

    def make_hof(self) -> None:
        """Non-recursive higher-order functions."""
        ch = self.ch
        name = self.fresh("hof")
        shape = pick(ch, ["{f} x {{ f (f x) }}", "{f} (x : num) : num {{ f x + f x }}", "{f} x {{ f x }}",
                          "{f} (x : num) : num {{ let y = f x; y * 2 }}", "{f} (x : 'a) : num {{ f x - f 0 }}"])
        self.decls.append(f"function {name} " + shape.format(f=self.fn_param("f")))
        self.helpers.append(Helper(name, "num", lambda g, env, d: (
            f"{name} {paren(g.closure(env, d))} {paren(g.num(env, d - 1))}")))

    def make_plain(self) -> None:
        """A first-order function whose body comes from the expression generator."""
        ch = self.ch
        name = self.fresh("fn")
        kinds = [pick(ch, ["num", "num", "bag", "pair", "list", "'a"]) for _ in range(weighted(ch, [(1, 1), (2, 2), (1, 3)]))]
        params, env = [], []
        for i, k in enumerate(kinds):
            p = f"a{i}"
            ann = pick(ch, ["", "", "[2] ", "[1] "]) if k == "num" else ""
            tyt = "num" if k == "'a" else k
            text = {"num": "num", "bag": "bag P", "pair": "(num, num)", "list": "list num", "'a": "'a"}[k]
            params.append(f"({p} : {ann}{text})" if coin(ch, 85) else p)
            env.append(Var(p, tyt, False))
        ret = pick(ch, ["", " : num"])
        body = self.num(env, 3)
        self.decls.append(f"function {name} {' '.join(params)}{ret} {{ {body} }}")

        def call(g: "ProgramGen", env2: list[Var], d: int) -> str:
            args = [g.arg_of(k if k != "'a" else "num", env2, d) for k in kinds]
            return f"{name} " + " ".join(paren(a) for a in args)

        self.helpers.append(Helper(name, "num", call, "bag" in kinds))

    def arg_of(self, k: str, env: list[Var], d: int) -> str:
        if k == "num":
            return self.num(env, d)
        if k == "bag":
            return self.bag(env, d)
        return self.value(k, env, d)

    def make_cdf(self) -> None:
        """Recursion over a constant list with a partition per step (parallel composition)."""
        ch = self.ch
        name = self.fresh("cdf")
        nxt = pick(ch, ["hi", "hi", "b", "lo"])
        rel = pick(ch, ["count lo", "count lo + count hi", "count b"])
        self.decls.append(
            f"function {name} (b : bag P) (bs : list num) : fuzzy (list num) {{ case bs of {{ [] => return [] "
            f"| h :: t => let (lo, hi) = split (fun r -> r.age < h) b; sample c = laplace {self.eps()} ({rel}); "
            f"sample rest = {name} {nxt} t; return (c :: rest) }} }}")
        self.helpers.append(Helper(name, "fuzzy", lambda g, env, d: (
            f"{name} {paren(g.bag(env, d))} {pick(g.ch, ['[20, 50]', '[10]', '[10, 20, 30, 40]', '[]'])}"), True))

    def make_bagloop(self) -> None:
        """A release loop over a bag with a counter (the counter may be private)."""
        ch = self.ch
        name = self.fresh("bl")
        rel = pick(ch, ["count b", "sum (map (fun r -> clip 0 10 r.age) b)", "count (filter (fun r -> r.ok) b)"])
        self.decls.append(
            f"function {name} (b : bag P) (n : num) : fuzzy num {{ if n <= 0 then return 0 else "
            f"(sample c = laplace {self.eps()} ({rel}); {name} b (n - 1)) }}")
        self.helpers.append(Helper(name, "fuzzy", lambda g, env, d: (
            f"{name} {paren(g.bag(env, d))} {paren(g.counter(env, d))}"), True))

    def make_genrec(self) -> None:
        """A recursive function on a counter whose base and step come from the expression
        generator; the step may use the recursive call."""
        ch = self.ch
        name = self.fresh("gr")
        xty = pick(ch, ["num", "num[0, 1]", "'a", "bag P"])
        xkind = "bag" if xty == "bag P" else "num"
        env = [Var("n", "num", True), Var("x", xkind, False)]
        base = self.num(env, 1) if xkind == "bag" or coin(ch, 50) else pick(ch, ["x", "0", "1"])
        if xkind == "bag":
            rec = f"{name} (n - 1) {pick(ch, ['x', '(filter (fun r -> r.ok) x)'])}"
        elif xty == "num[0, 1]":
            rec = f"{name} (n - 1) {pick(ch, ['x', '(clip 0 1 (x * 2))', '(x * x)'])}"
        else:
            rec = f"{name} (n - 1) {pick(ch, ['x', '(x + 1)', '(x * 2)', '(clip 0 1 x)'])}"
        step = pick(ch, ["{r} + {e}", "{e} + {r}", "{r} * {e}", "{r}", "let v = {r}; {e}", "({r}, {e}).1",
                         "max ({r}) ({e})"])
        body = step.format(r=rec, e=paren(self.num(env, 1)))
        ret = "'a" if xty == "'a" and base == "x" and step == "{r}" else "num"
        self.decls.append(f"function {name} (n : num) (x : {xty}) : {ret} "
                          f"{{ if n <= 0 then {base} else {body} }}")

        def call(g: "ProgramGen", env2: list[Var], d: int) -> str:
            x = g.bag(env2, d) if xkind == "bag" else g.num(env2, d)
            if xty == "num[0, 1]":
                x = f"clip 0 1 {paren(x)}"
            return f"{name} {paren(g.counter(env2, d))} {paren(x)}"

        self.helpers.append(Helper(name, "num", call, xkind == "bag"))

    def make_mechfn(self) -> None:
        """A function that releases: a mechanism inside a helper, called with any argument."""
        ch = self.ch
        name = self.fresh("nc")
        shape = pick(ch, ["(x : num) : fuzzy num {{ laplace {e} x }}",
                          "(b : bag P) : fuzzy num {{ laplace {e} (count b) }}",
                          "(x : num) : fuzzy num {{ sample a = laplace {e} x; laplace {e} (x + a) }}",
                          "(x : num) : fuzzy num {{ gaussian {e} x }}",
                          "(b : bag P) : fuzzy num {{ sample a = gaussian {e} (count b); gaussian {e} (count b + a) }}",
                          "(b : bag 'a) : fuzzy num {{ noisy_max {e} [1, 2] (fun c -> c * count b) }}"])
        self.decls.append(f"function {name} " + shape.format(e=self.eps()))
        takes_bag = "bag" in shape.split(")")[0]

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            return f"{name} {paren(g.bag(env, d) if takes_bag else g.num(env, d))}"

        self.helpers.append(Helper(name, "fuzzy", call, takes_bag))

    def make_curried(self) -> None:
        """`function cu (f : bag P -o bag P [-o bag P] -o fuzzy num) (t : bag P) (c : bool) : fuzzy num`,
        whose body gives f its first argument and completes it later: at once, through a let, joined
        at a branch with another partial application or a function of another cost, given to a
        declared parameter (once, twice, or two of them), returned by a function, or partially
        applied twice.  What main gives for f captures nothing, captures the table, releases twice,
        or is a partial application of a top-level function.  Rule Rho charges each release whole
        where its last argument is given, however the partial application got there."""
        ch = self.ch
        name = self.fresh("cu")
        arity = weighted(ch, [(4, 2), (1, 3)])
        rest = " ".join(["t"] * (arity - 1))       # the arguments after the first
        ftype = " -o ".join(["bag P"] * arity) + " -o fuzzy num"
        gtype = " -o ".join(["bag P"] * (arity - 1)) + " -o fuzzy num"  # after one argument
        e = self.eps()
        shape = pick(ch, ["direct", "bound", "join", "join_other", "param", "param_twice", "params",
                          "returned", "twice"])
        if shape == "direct":
            body = f"f t {rest}"
        elif shape == "bound":
            body = f"let g = f t; g {rest}"
        elif shape == "join":
            body = f"let g = if c then f t else f (filter (fun r -> r.ok) t); g {rest}"
        elif shape == "join_other":
            ps = " ".join(["u", "v"][:arity - 1])
            counts = " + ".join(f"count {p}" for p in ps.split())
            other = pick(ch, [f"laplace {e} ({counts})", f"laplace {e} ({counts} + count t)"])
            body = f"let g = if c then f t else ((fun {ps} -> {other}) : {gtype}); g {rest}"
        elif shape in ("param", "param_twice", "params"):
            us = self.fresh("us")
            us_rest = " ".join(["u"] * (arity - 1))
            if shape == "params":
                self.decls.append(f"function {us} (g : {gtype}) (h : {gtype}) (u : bag P) : fuzzy num "
                                  f"{{ sample a = g {us_rest}; sample b = h {us_rest}; return (a + b) }}")
                body = f"{us} (f t) (f t) t"
            else:
                inner = f"g {us_rest}" if shape == "param" else f"sample a = g {us_rest}; g {us_rest}"
                self.decls.append(f"function {us} (g : {gtype}) (u : bag P) : fuzzy num {{ {inner} }}")
                body = f"{us} (f t) t"
        elif shape == "returned":
            mk = self.fresh("mk")
            self.decls.append(f"function {mk} (f : {ftype}) (t : bag P) : {gtype} {{ f t }}")
            body = f"({mk} f t) {rest}"
        elif shape == "twice" and arity == 3:
            body = "let g = f t; let h = g t; h t"
        else:
            body = f"sample a = f t {rest}; f t {rest}"
        self.decls.append(f"function {name} (f : {ftype}) (t : bag P) (c : bool) : fuzzy num {{ {body} }}")

        def call(g: "ProgramGen", env: list[Var], d: int) -> str:
            return (f"{name} {paren(g.curried_fn(env, d, arity))} {paren(g.bag(env, d))} "
                    f"{paren(g.boolean(env, d - 1, public=True))}")

        self.helpers.append(Helper(name, "fuzzy", call, True))

    def curried_fn(self, env: list[Var], d: int, arity: int) -> str:
        """A function of `arity` bags that releases, for a curried declared type: capturing nothing,
        capturing private data, releasing twice, or a partial application of a top-level function."""
        ch = self.ch
        ps = ["a", "b", "x"][:arity]
        counts = " + ".join(f"count {p}" for p in ps)
        e = pick(ch, ["1", "0.5", "0.1"]) if not coin(ch, 10) else "2"  # 2 exceeds the declared 1 (E0301)
        kind = pick(ch, ["plain", "captures", "twice", "partial"])
        if kind == "captures" and self.has_bag(env):
            return f"fun {' '.join(ps)} -> laplace {e} ({counts} + {paren(self.private_num(env, d - 1))})"
        if kind == "twice":
            return (f"fun {' '.join(ps)} -> sample y = laplace {e} (count {ps[0]}); "
                    f"laplace {e} ({' + '.join(f'count {p}' for p in ps[1:])} + y)")
        if kind == "partial":
            key = f"rel{arity}"
            if key not in self.made:
                name = self.made[key] = self.fresh("rel")
                self.decls.append(f"function {name} (e : num) {' '.join(f'({p} : bag P)' for p in ps)} : fuzzy num "
                                  f"{{ laplace e ({counts}) }}")
            return f"{self.made[key]} {e}"
        return f"fun {' '.join(ps)} -> laplace {e} ({counts})"

    # ---- function values of the rarer kinds, and the helpers they need (made lazily, once) ------------

    def fn_value(self, env: list[Var], d: int, private: bool = False) -> str:
        """A num -> num function value of a rarer kind: a partial application of a top-level or
        local function, a function expression ascribed a declared type, or a closure returned by a
        function through a second one (`private`: capturing private data, when a table is in scope)."""
        kind = weighted(self.ch, [(2, "partial"), (3, "ascribed"), (2, "returned")])
        private = private and self.has_bag(env)
        if kind == "ascribed":
            return self.ascribed(env, d, private)
        if kind == "returned":
            return self.returned(env, d, private)
        return self.partial(env, d, private)

    def captured(self, env: list[Var], d: int, private: bool) -> str:
        """A number a function value captures: private data (`private`), or any number."""
        return self.private_num(env, d - 1) if private else self.num(env, d - 1)

    def made_body(self, build: Callable[[], str]) -> str:
        """The body of a lazily made helper, built without nesting another one inside."""
        was, self.making = self.making, True
        try:
            return build()
        finally:
            self.making = was

    def deep_name(self) -> str:
        deep = next((h for h in self.helpers if h.name.startswith("deep")), None)
        return (deep or self.make_deep()).name

    def by_key_score(self, env: list[Var], d: int, c: str) -> str:
        """DiffPID3's score: a chain on the candidate choosing the key a bag is grouped by, each
        branch the same generic quality of its partition.  The batched scores merge the branches
        into one call, and a bag variable (one object, every row in a part) flattens the
        candidates' partitions as blocks; a bag expression, made anew in each branch, gives
        partitions of different bags (gathered, or one batched pmap per candidate)."""
        ch = self.ch
        if "qual" not in self.made:
            lsum, qual = self.made["qsum"], self.made["qual"] = self.fresh("qsum"), self.fresh("qual")
            self.decls.append(f"function {lsum} (xs : list num) : num "
                              f"{{ case xs of {{ [] => 0 | h :: t => h + {lsum} t }} }}")
            inner = pick(ch, ["count g", "max (count (filter (fun r -> r.age <= 50) g)) (count g - 2)",
                              'let k = groupby (fun r -> r.sex) g; max (count (part k "M")) (count (part k "F"))'])
            self.decls.append(f"function {qual} ps {{ {lsum} (values (pmap (fun g -> {inner}) ps)) }}")
        qual = self.made["qual"]
        bags = self.vars(env, "bag")
        bag = pick(ch, bags).name if bags and coin(ch, 75) else paren(self.bag(env, d - 1))
        keys = ["r.sex", "r.n", "r.n", "r.sex"]
        chain = f"{qual} (groupby (fun r -> {keys[0]}) {bag})"
        for i, key in enumerate(keys[1:weighted(ch, [(1, 2), (2, 3), (2, 4)])], start=1):
            cond = pick(ch, [f"{c} == {i}", f"{c} < {i}", f"{c} == {i * 50}"])
            chain = f"if {cond} then {qual} (groupby (fun r -> {key}) {bag}) else {chain}"
        return chain

    def spin_name(self) -> str:
        """`spin n`: for n > 0 a recursion that never reaches its base case (the checker cannot unroll
        it: FAIL); it ends at the runtime's call-depth limit."""
        if "spin" not in self.made:
            name = self.made["spin"] = self.fresh("spin")
            self.decls.append(f"function {name} (n : num) : num {{ if n > 0 then {name} n else 0 }}")
        return self.made["spin"]

    def partial_fn(self) -> tuple[str, int]:
        """`function pf (a : num) [(b : num)] (x : num) : num { ... }`, to be applied partially: its name
        and how many arguments a partial application gives it."""
        if "pf" not in self.made:
            ch = self.ch
            name = self.made["pf"] = self.fresh("pf")
            given = weighted(ch, [(3, 1), (1, 2)])
            params = ["a", "b"][:given] + ["x"]
            g = " + ".join(params[:given])
            e = self.made_body(lambda: self.num([Var(p, "num", False) for p in params], 1))
            body = pick(ch, ["{g} + x", "x + {e}", "{e} + 2 * x", "max ({g}) x", "x", "if {g} > 0 then x else 0",
                             "x + 0 * {deep} ({g})", "{g} * x",
                             "if x <= 0 then {g} else (let q = {name} {ga}; q (x - 1))"])
            body = body.format(g=g, e=paren(e), name=name, ga=" ".join(params[:given]),
                               deep=self.deep_name() if "{deep}" in body else "")
            self.decls.append(f"function {name} {' '.join(f'({p} : num)' for p in params)} : num {{ {body} }}")
            self.made["pf_given"] = str(given)

            def call(gen: "ProgramGen", env: list[Var], d: int) -> str:
                args = [paren(gen.num(env, d - 1)) for _ in range(given + 1)]
                if coin(gen.ch, 40):  # bound partially applied, then completed
                    p = gen.fresh("p")
                    return f"(let {p} = {name} {' '.join(args[:given])}; {p} {args[given]})"
                return f"{name} {' '.join(args)}"

            self.helpers.append(Helper(name, "num", call))
        return self.made["pf"], int(self.made["pf_given"])

    def partial(self, env: list[Var], d: int, private: bool) -> str:
        """A partial application: of the top-level `pf`, or of a local two-argument function."""
        ch = self.ch
        if coin(ch, 25):
            lf = self.fresh("lf")
            body = pick(ch, ["a + x", "x + 2 * a", "max a x", "if a > 0 then x else 0"])
            return (f"(let {lf} = fun {pick(ch, ['(a : num) (x : num)', 'a x'])} -> {body}; "
                    f"{lf} {paren(self.captured(env, d, private))})")
        name, given = self.partial_fn()
        args = [self.captured(env, d, private) if i == 0 else self.num(env, d - 1) for i in range(given)]
        return f"{name} {' '.join(paren(a) for a in args)}"

    def part_partial(self, env: list[Var], d: int, ret: str) -> str:
        """A partial application of a per-part helper `(c : num) (p : bag P)`, for `each` (ret
        "fuzzy") or `pmap` (ret "num"); `c` is an epsilon, or captured (often private) data."""
        ch = self.ch
        key = "pe" if ret == "fuzzy" else "pc"
        if key not in self.made:
            name = self.made[key] = self.fresh(key)
            if ret == "fuzzy":
                body = pick(ch, ["laplace c (count p)", "laplace {e} (count p + c)", "laplace {e} (clip 0 10 c + count p)",
                                 "sample t = laplace {e} (count p); return (t + c)",
                                 "let z = {deep} c; laplace {e} (count p)"])
            else:
                body = pick(ch, ["count p + c", "c", "2 * count p + c", "sum (map (fun r -> clip 0 10 r.age) p) + c",
                                 "let z = {deep} c; count p"])
            self.made[key + "_eps"] = "1" if body.startswith("laplace c ") else ""
            body = body.format(e=self.eps() if "{e}" in body else "", deep=self.deep_name() if "{deep}" in body else "")
            self.decls.append(f"function {name} (c : num) (p : bag P) : {'fuzzy num' if ret == 'fuzzy' else 'num'} "
                              f"{{ {body} }}")
        name = self.made[key]
        if self.made[key + "_eps"]:
            return f"{name} {self.eps()}"
        return f"{name} {paren(self.captured(env, d, self.has_bag(env) and coin(ch, 60)))}"

    def ascribed(self, env: list[Var], d: int, private: bool) -> str:
        """A function expression ascribed a declared type, `((fun (y : num) -> y + e) : num -o[k] num)`:
        the bound k is sometimes exceeded (refused), and the expression sometimes computes a hazard
        before the function."""
        ch = self.ch
        arrow = weighted(ch, [(4, "-o"), (2, "-o[2]"), (1, "-o[0]"), (1, "-o[1]"), (1, "->")])
        if coin(ch, 25):  # a partial application given a declared type
            return f"({self.partial(env, d, private)} : num {arrow} num)"
        y = self.fresh("y")
        head = pick(ch, [f"fun ({y} : num) ->", f"fun {y} ->"])
        e = paren(self.captured(env + [Var(y, "num", True)], d, private))
        body = pick(ch, ["{y} + {e}", "2 * {y} + {e}", "{e}", "{y} + {y}", "clip 0 10 {y} + {e}", "{e} - {y}"])
        lam = f"{head} {body.format(y=y, e=e)}"
        if coin(ch, 15):
            lam = f"let {self.fresh('z')} = {self.hazard(env, d - 1)}; {lam}"
        return f"(({lam}) : num {arrow} num)"

    def mk_fns(self) -> tuple[str, str]:
        """`function mk (k : num) { fun x -> x + k }` and `function mw (k : num) { mk k }`: a closure
        returned through a second function."""
        if "mw" not in self.made:
            ch = self.ch
            mk, mw = self.made["mk"], self.made["mw"] = self.fresh("mk"), self.fresh("mw")
            ret = weighted(ch, [(3, ""), (1, " : num -o num"), (1, " : num -o[2] num")])
            body = pick(ch, ["fun x -> x + k", "fun (x : num) -> x + k", "fun x -> k", "fun x -> max x k",
                             "fun x -> 2 * x + k", "fun x -> let z = {deep} k; x + k"])
            body = body.format(deep=self.deep_name() if "{deep}" in body else "")
            wrap = pick(ch, ["{mk} k", "let h = {mk} (k * 2); h", "let h = {mk} k; fun y -> h y", "{mk} (k + 1)"])
            self.decls.append(f"function {mk} (k : num){ret} {{ {body} }}")
            self.decls.append(f"function {mw} (k : num) {{ {wrap.format(mk=mk)} }}")
            self.helpers.append(Helper(mw, "num", lambda g, env, d: (
                f"{mw} {paren(g.num(env, d - 1))} {paren(g.num(env, d - 1))}")))
        return self.made["mk"], self.made["mw"]

    def returned(self, env: list[Var], d: int, private: bool) -> str:
        """A closure returned by `mw` (through `mk`), or rarely by `mk` itself, capturing its argument."""
        mk, mw = self.mk_fns()
        f = weighted(self.ch, [(3, mw), (1, mk)])
        return f"{f} {paren(self.captured(env, d, private))}"

    def branch_call(self, env: list[Var], d: int) -> str:
        """A call of a helper that branches on its bool, sum or list parameter, with an arm that may
        not finish (a recursion the checker cannot unroll); the argument mostly from private data."""
        ch = self.ch
        kind = pick(ch, ["bool", "sum", "list"])
        if "br" + kind not in self.made:
            name = self.made["br" + kind] = self.fresh("br")
            first = coin(ch, 50)  # the arm that may not finish comes first (then, inl, [])
            # its argument: the payload (a sum's, a list's head) where the arm binds one, else n
            v = "n" if kind == "bool" or (kind == "list" and first) else {"sum": "c", "list": "h"}[kind]
            stuck = pick(ch, ["{spin} 1", "{spin} {v}", "{deep} {v}", "{deep} n"])
            stuck = stuck.format(v=v, spin=self.spin_name() if "{spin}" in stuck else "",
                                 deep=self.deep_name() if "{deep}" in stuck else "")
            other = pick(ch, ["0", "n", "1"])
            arms = (stuck, other) if first else (other, stuck)
            if kind == "bool":
                decl = f"(b : bool) (n : num) : num {{ if b then {arms[0]} else {arms[1]} }}"
            elif kind == "sum":
                decl = f"(s : num + num) (n : num) : num {{ case s of {{ inl c => {arms[0]} | inr c => {arms[1]} }} }}"
            else:
                decl = f"(xs : list num) (n : num) : num {{ case xs of {{ [] => {arms[0]} | h :: t => {arms[1]} }} }}"
            self.decls.append(f"function {name} {decl}")
        name = self.made["br" + kind]
        private = self.has_bag(env) and not coin(ch, 35)
        pub = self.vars(env, "num", public=True)
        n = pick(ch, pub).name if pub and coin(ch, 50) else pick(ch, ["0", "1", "3", "12"])
        if not private:
            arg = self.boolean(env, d - 1, public=True) if kind == "bool" else self.value(kind, env, d - 1, public=True)
            return f"{name} {paren(arg)} {n}"
        cond = f"{paren(self.private_num(env, d - 1))} > {pick(ch, ['0', '3', '12'])}"
        if kind == "bool":
            arg = cond
        elif kind == "sum":
            arg = pick(ch, [f"if {cond} then (inl 1 : num + num) else (inr 1 : num + num)",
                            f"(inr {paren(self.private_num(env, d - 1))} : num + num)"])
        else:
            arg = pick(ch, [f"if {cond} then [1] else []", f"[{self.private_num(env, d - 1)}]"])
        return f"{name} {paren(arg)} {n}"


def generate(ch: Chooser) -> Program:
    return ProgramGen(ch).program()

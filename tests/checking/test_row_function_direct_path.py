"""Rule Instance's direct path for a closure a primitive applies to fresh holders
(`apply_to_holders`) gives what `apply` gives, and a lambda's free names kept per syntax node are
those of a fresh walk, in the same order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fuzzpy.checking import instances
from fuzzpy.checking.helpers import _add_free_vars, _free_vars
from fuzzpy.checking.program import check_source
from fuzzpy.syntax import ast as A
from fuzzpy.syntax.parser import parse_module
from tests.checking.report_guard import answer

ROOT = Path(__file__).resolve().parents[2]

ROW_FUNCTIONS = """
schema T { x : num[0, 100], y : num[-5, 5], k : cat{"a", "b"}, f : bool }
param eps : num = 0.5;
function main (db : bag T) : fuzzy (num, num) {
  let c = 3;
  let f = fun r -> r.x + c;
  let kept = filter (fun r -> r.x < 50 && !r.f) db;
  let twice = map f (map (fun r -> { x = f r, y = r.y, k = r.k, f = r.f }) kept);
  let g = groupby (fun r -> r.k) db;
  sample a = laplace eps (sum (map (fun r -> clip 0 10 r.y) g.a));
  sample b = laplace eps (sum (map (fun v -> clip 0 10 v) twice));
  return (a, b)
}
"""

REFUSED = """
schema T { x : num[0, 100] }
function main (db : bag T) : fuzzy num {
  let s = sum (map (fun r -> clip 0 1 r.x) db);
  laplace 0.1 (sum (filter (fun r -> r.x > s) db))
}
"""


def _programs() -> list[tuple[str, str]]:
    out = [("row functions", ROW_FUNCTIONS), ("refused", REFUSED)]
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.check_speed import program
        from benchmarks.lsp_latency import generate
    finally:
        sys.path.pop(0)
    out += [("check_speed", program(100)), ("lsp_latency", generate(6, 7))]
    out += [(p.name, p.read_text()) for p in sorted(ROOT.glob("examples/**/*.fz")) if "fun " in p.read_text()][:12]
    return out


def _stated(text: str) -> str:
    report = check_source(text, "direct.fz")
    return json.dumps(answer(report), sort_keys=True, default=repr)


@pytest.mark.parametrize("name,text", _programs(), ids=[n for n, _ in _programs()])
def test_rule_instance_direct_path_for_row_functions_agrees_with_apply(name, text, monkeypatch):
    direct = _stated(text)
    monkeypatch.setattr(instances.InstanceRules, "_holder_key", lambda self, fn, holders: None)
    assert _stated(text) == direct


def test_the_direct_path_is_taken_for_a_lambda_given_to_a_primitive(monkeypatch):
    taken = []
    original = instances.InstanceRules._check_closure_instance

    def counting(self, *args):
        taken.append(args[0])
        return original(self, *args)

    monkeypatch.setattr(instances.InstanceRules, "_check_closure_instance", counting)
    assert check_source(ROW_FUNCTIONS, "direct.fz").ok
    assert len(taken) >= 4


def _lambdas(node: A.Node):
    if isinstance(node, A.Lambda):
        yield node
    for child in A.children(node):
        yield from _lambdas(child)


def test_free_names_kept_per_node_are_a_fresh_walks_in_its_order():
    paths = [*ROOT.glob("examples/**/*.fz"), *ROOT.glob("stdlib/*.fz")]
    seen = 0
    for path in sorted(paths):
        module, _ = parse_module(path.read_text(), str(path))
        for decl in module.decls:
            for lam in _lambdas(decl):
                bound = {p.name for p in lam.params}
                fresh: set[str] = set()
                _add_free_vars(lam.body, bound, fresh)
                kept = _free_vars(lam.body, bound)
                assert list(kept) == list(fresh)
                assert _free_vars(lam.body, set(bound)) is kept  # the same set, asked again
                assert _free_vars(lam.body, set()) >= kept  # another bound set: its own entry
                seen += 1
    assert seen > 20

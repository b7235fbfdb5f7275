"""Rule Widen (breadth), docs/soundness.md: checking top_k does not grow exponentially with k,
the proven epsilon stays exact, and forgetting constant lists never lowers a bound."""

from __future__ import annotations

from fractions import Fraction as F

from fuzzpy.checking.instances import WIDEN_BREADTH
from fuzzpy.checking.program import check_source

OCC = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
       "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
       "Priv-house-serv", "Protective-serv", "Armed-Forces", "?"]
QUOTED = ", ".join(f'"{o}"' for o in OCC)
HEAD = f'import "stdlib/select.fz"\nschema Adult {{ occupation : cat{{{QUOTED}}}, age : num[0, 100] }}\n'


def top_k(k: int):
    src = HEAD + (f'param occ : list string = [{QUOTED}];\n'
                  'function main (db : bag Adult) : fuzzy (list string) {\n'
                  f'  top_k (1 / 10) {k} occ (fun r -> r.occupation) db\n}}\n')
    return check_source(src, "topk.fz")


def codes(report) -> list[str]:
    return [d.code for d in report.diagnostics if d.severity == "error"]


def test_top_k_instances_stay_few_and_epsilon_exact():
    counts = {}
    for k in (2, 3, 4, 5):
        r = top_k(k)
        assert codes(r) == []
        assert r.epsilon == F(k, 10)  # k rounds of noisy max at 1/10 each
        counts[k] = r.instances
    # Before the rule: 1,500 instances for k = 2, 8,000 for k = 3, about four times more per k.
    assert max(counts.values()) < 4 * WIDEN_BREADTH
    assert counts[5] - counts[4] < 20 and counts[4] - counts[3] < 20  # linear, not exponential


def test_all_candidates_is_still_n_rounds():
    r = top_k(15)
    assert codes(r) == [] and r.epsilon == F(15, 10)


def test_more_rounds_than_candidates_is_charged_conservatively():
    # The forgotten list's length is unknown: k rounds, not min(k, n) (docs/soundness.md).
    r = top_k(16)
    assert codes(r) == [] and r.epsilon == F(16, 10)


# A function called under a released condition with many different constant lists, each
# releasing once per element: once the lists are forgotten, the number of releases is unknown,
# so the bound must become infinite (refused), never smaller than the true cost.
LOOP = '''
schema T { x : num[0, 1] }
function loop (xs : list num) (b : bag T) : fuzzy num {
  case xs of { [] => return 0 | h :: t => sample a = laplace 1 (count b); sample r = loop t b; return (a + r) }
}
function pick (ls : list (list num)) (b : bag T) : fuzzy num {
  case ls of { [] => return 0 | l :: rest =>
    sample c = laplace 1 (count b);
    if c > 5 then loop l b else pick rest b }
}
'''


def loop_program(n: int) -> str:
    """pick walks n constant lists of lengths 1..n; at each, a released value decides whether to
    release once per element of the list: the deepest path releases n + n times."""
    lists = ", ".join("[" + ", ".join(["1"] * i) + "]" for i in range(1, n + 1))
    return LOOP + f"function main (db : bag T) : fuzzy num {{ pick [{lists}] db }}\n"


def test_few_lists_are_unrolled_exactly():
    r = check_source(loop_program(5), "loop.fz")
    assert codes(r) == [] and r.epsilon == 10


def test_forgotten_lists_never_lower_the_bound():
    n = WIDEN_BREADTH + 10
    r = check_source(loop_program(n), "loop.fz")
    # The exact bound is 2 n; with the lists forgotten the loop's length is unknown: refused.
    assert "E0302" in codes(r) and r.epsilon >= 2 * n


def test_a_private_head_on_a_constant_tail_is_not_public():
    src = HEAD + '''
function pick (kept : list num) (b : bag Adult) : fuzzy num {
  noisy_max 1 ((sum (map (fun r -> r.age) b)) :: kept) (fun c -> count b)
}
function main (db : bag Adult) : fuzzy num { pick [1, 2] db }
'''
    r = check_source(src, "p.fz")
    assert codes(r) == ["E0209"]
    assert "candidates of noisy_max must be public" in r.diagnostics[0].message


def test_a_released_head_on_a_constant_tail_is_public():
    src = HEAD + '''
function pick (kept : list num) (b : bag Adult) : fuzzy num {
  sample m = laplace 1 (count b);
  noisy_max 1 (m :: kept) (fun c -> count (filter (fun r -> r.age < c) b))
}
function main (db : bag Adult) : fuzzy num { pick [1, 2] db }
'''
    r = check_source(src, "p.fz")
    assert codes(r) == [] and r.epsilon == 2

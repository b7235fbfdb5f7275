"""Checker speed: parse and check time per 1,000 lines, LP solves, and `fuzzpy check` start-up.

    python benchmarks/check_speed.py

Generates programs of ordinary code (arithmetic, lets, branches, row functions, bag operations,
mechanisms, a recursive function) of 1,000 and 10,000 lines.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fuzzpy.checking.program import check_source
from fuzzpy.syntax import parser

HEADER = 'schema T { x : num[0, 100], y : num[-5, 5], k : cat{"a", "b", "c"}, f : bool }\nparam eps : num = 0.01;\n'


def block(i: int) -> str:
    """One 20-line group of ordinary declarations."""
    return f"""
function arith{i} (a : num) (b : num) : num {{
  let c = a + 2 * b;
  let d = if a > b then c - a else c + b / 2;
  clip 0 10 (d * 3 - a)
}}
function rows{i} (db : bag T) : bag num[0, 50] {{
  let small = filter (fun r -> r.x < {i % 90 + 5} && !r.f) db;
  map (fun r -> clip 0 50 (r.x + r.y * 2)) small
}}
function stats{i} (db : bag T) : fuzzy (num, num) {{
  let g = groupby (fun r -> r.k) db;
  sample n = laplace eps (count g.a);
  sample s = laplace eps (sum (rows{i} g.b));
  return (n, arith{i} n s)
}}
function sumto{i} (xs : list num) : num {{
  case xs of {{ [] => 0 | h :: t => h + sumto{i} t }}
}}
"""


def program(lines: int) -> str:
    body, n = [HEADER], 0
    while sum(s.count("\n") for s in body) < lines - 8:
        body.append(block(n))
        n += 1
    body.append("function main (db : bag T) : fuzzy (num, num) {\n  stats0 db\n}\n")
    return "".join(body)


def measure(lines: int, repeat: int = 3) -> dict:
    src = program(lines)
    n = src.count("\n")
    parse_times, check_times, solves = [], [], 0
    for _ in range(repeat):
        parser.parse_chunk.cache_clear()
        t0 = time.perf_counter()
        module, diags = parser.parse_module(src, "bench.fz")
        parse_times.append(time.perf_counter() - t0)
        assert not diags, diags[:1]
        parser.parse_chunk.cache_clear()
        report = check_source(src, "bench.fz")
        assert report.ok, [d.message for d in report.diagnostics[:3]]
        check_times.append(report.timings["check"])
        solves = report.lp_solves
    return {"lines": n, "parse_per_1000": statistics.median(parse_times) / n * 1000,
            "check_per_1000": statistics.median(check_times) / n * 1000, "lp_solves": solves}


def startup() -> float:
    src = program(50)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "small.fz"
        path.write_text(src)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "fuzzpy.interfaces.cli", "check", str(path)],
                           capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    for lines in (1000, 10000):
        m = measure(lines, repeat=3 if lines <= 1000 else 1)
        print(f"{m['lines']:>6} lines: parse {m['parse_per_1000'] * 1000:7.1f} ms / 1,000 lines "
              f"({1000 / m['parse_per_1000']:,.0f} lines/s), check {m['check_per_1000'] * 1000:7.1f} ms / "
              f"1,000 lines, LP solves {m['lp_solves']}")
    print(f"fuzzpy check on a 50-line file, from the shell: {startup() * 1000:.0f} ms (median of 5)")


if __name__ == "__main__":
    main()

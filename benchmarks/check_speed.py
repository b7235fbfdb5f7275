"""Checker speed: parse and check time per 1,000 lines, LP solves, and `fuzzpy check` start-up.

    python benchmarks/check_speed.py [ROUNDS] [--shell | --in-process | --startup [--against DIR]] [--code DIR]

Generates programs of ordinary code (arithmetic, lets, branches, row functions, bag operations,
mechanisms, a recursive function) of 1,000 and 10,000 lines.  In-process figures are given
against lark alone parsing the same text, timed in the same rounds (lark, parse, check, in turn:
the machine's load weighs on all three alike); each figure is the fastest of its rounds, each
ratio the median of the rounds' ratios.  Shell figures (start-up, the check cache, a 50-line
file that imports three standard-library files) are given against `python -c pass`,
`python -c "import lark"` and `python -c "import pandas"` run in turn with them.
`--code DIR` imports fuzzpy from DIR (another checkout) instead: run it in turn with the current
code to compare two versions in one session.  `--startup` times only the start-up of a cold
check (50 lines, and 50 lines importing the standard library) against `python -c pass` and
`import lark`; with `--against DIR` the same checks with DIR's code run in the same rounds, and the
median of the rounds' ratios (this code over DIR's) is printed.  docs/performance.md has the
figures of one run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

if "--code" in sys.argv:  # before anything imports fuzzpy
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

from fuzzpy.checking.program import check_source  # noqa: E402
from fuzzpy.syntax import parser  # noqa: E402

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


STDLIB_IMPORTS = 'import "stdlib/stats.fz"\nimport "stdlib/bags.fz"\nimport "stdlib/ml.fz"\n'


def program(lines: int) -> str:
    body, n = [HEADER], 0
    while sum(s.count("\n") for s in body) < lines - 8:
        body.append(block(n))
        n += 1
    body.append("function main (db : bag T) : fuzzy (num, num) {\n  stats0 db\n}\n")
    return "".join(body)


def measure(lines: int, repeat: int = 3) -> dict:
    """Parse and check per 1,000 lines, and their ratios to lark alone parsing the same text,
    the three timed in turn in each round."""
    src = program(lines)
    n = src.count("\n")
    bare = _bare_lark()
    floor_times, parse_times, check_times, solves = [], [], [], 0
    for _ in range(repeat):
        floor_times.append(lark_floor(src, bare))
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
    return {"lines": n, "parse_per_1000": min(parse_times) / n * 1000,
            "check_per_1000": min(check_times) / n * 1000, "floor_per_1000": min(floor_times) / n * 1000,
            "parse_ratio": statistics.median(p / f for p, f in zip(parse_times, floor_times)),
            "check_ratio": statistics.median(c / f for c, f in zip(check_times, floor_times)),
            "lp_solves": solves}


def _bare_lark():
    from lark import Lark

    return Lark(parser.GRAMMAR.read_text(), parser="lalr", lexer="contextual", maybe_placeholders=False)


def lark_floor(src: str, bare=None) -> float:
    """The same text through lark alone (same grammar, LALR, no AST building, no chunking):
    the in-process baseline of the parse and check figures."""
    bare = bare or _bare_lark()
    t0 = time.perf_counter()
    for _, text in parser.split_chunks(src):
        if text.strip():
            bare.parse(text)
    return time.perf_counter() - t0


# ---- start-up and the check cache, measured from the shell ---------------------------------

THIS_CODE = Path(__file__).resolve().parents[1]  # the checkout this script belongs to


def _env() -> dict:
    """The environment of the timed commands: bytecode may be written (an installed package has
    its .pyc files; PYTHONDONTWRITEBYTECODE would recompile fuzzpy at every start), the cache
    folder is a fresh one of this run, and PYTHONPATH names the code to time (`--code`'s, else
    this checkout's).  The commands run in a temporary folder (`interleaved`): `python -m` puts
    the current folder first on sys.path, so run from a checkout's root they would import that
    checkout whatever PYTHONPATH says."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("FUZZPY_NO_CACHE", None)
    # the timed commands run the same code as the in-process figures
    env["PYTHONPATH"] = sys.path[0] if "--code" in sys.argv else str(THIS_CODE)
    return env


def interleaved(commands: dict[str, list[str]], env: dict, rounds: int,
                envs: Optional[dict[str, dict]] = None, per_round: Optional[dict] = None) -> dict[str, float]:
    """Median wall time of each command, the commands run in turn (one warm-up round first), so
    that the machine's load weighs on all of them alike.  `envs`: another environment for some
    commands; `per_round` receives each command's times, round by round."""
    times: dict[str, list[float]] = {k: [] for k in commands}
    with tempfile.TemporaryDirectory() as neutral:  # no fuzzpy package here to shadow PYTHONPATH (_env)
        for r in range(rounds + 1):
            for name, cmd in commands.items():
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True, env=(envs or {}).get(name, env), check=True,  # failed: no figure
                               cwd=neutral)
                if r:
                    times[name].append(time.perf_counter() - t0)
    if per_round is not None:
        per_round.update(times)
    return {k: statistics.median(v) for k, v in times.items()}


def startup(rounds: int, against: Optional[str]) -> None:
    """A cold check's whole process, against `python -c pass` and `import lark` (and, with
    `against`, the same checks with another checkout's code, in the same rounds)."""
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        env = _env()
        env["FUZZPY_CACHE_DIR"] = str(tmp_path / "cache")  # the parser's tables and parsed stdlib: kept
        small, with_stdlib = tmp_path / "small.fz", tmp_path / "with_stdlib.fz"
        small.write_text(program(50))
        with_stdlib.write_text(STDLIB_IMPORTS + program(47))
        checks = {"check 50 lines importing the stdlib (--no-cache)": [py, "-m", "fuzzpy", "check", "--no-cache",
                                                                      str(with_stdlib)],
                  "check 50 lines (--no-cache)": [py, "-m", "fuzzpy", "check", "--no-cache", str(small)]}
        commands = {"python -c pass": [py, "-c", "pass"], "python -c 'import lark'": [py, "-c", "import lark"], **checks}
        envs = {}
        if against is not None:
            other = {**env, "PYTHONPATH": str(Path(against).resolve()), "FUZZPY_CACHE_DIR": str(tmp_path / "other")}
            for name, cmd in checks.items():
                commands[f"{name}, {against}"] = cmd
                envs[f"{name}, {against}"] = other
        times: dict = {}
        medians = interleaved(commands, env, rounds, envs, times)
    base, lark = medians["python -c pass"], medians["python -c 'import lark'"]
    print(f"\nfrom the shell, median of {rounds} interleaved rounds:")
    for name, t in medians.items():
        print(f"  {name:<60} {t * 1000:7.0f} ms   {t / lark:5.2f} x import lark   {t / base:6.1f} x python -c pass")
    if against is not None:
        for name in checks:
            ratios = [a / b for a, b in zip(times[name], times[f"{name}, {against}"])]
            print(f"  {name}: this code over {against}'s, median of the rounds' ratios x{statistics.median(ratios):.2f}")


def project(folder: Path, files: int, lines: int) -> None:
    for i in range(files):
        (folder / f"part{i}.fz").write_text(program(lines))


def startup_and_cache(rounds: int) -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        env = _env()
        env["FUZZPY_CACHE_DIR"] = str(tmp_path / "cache")
        small = tmp_path / "small.fz"
        small.write_text(program(50))
        with_stdlib = tmp_path / "with_stdlib.fz"  # 50 lines that import three standard-library files
        with_stdlib.write_text(STDLIB_IMPORTS + program(47))
        big = tmp_path / "big.fz"
        big.write_text(program(10000))
        proj = tmp_path / "project"
        proj.mkdir()
        project(proj, 10, 1000)
        fz = [py, "-m", "fuzzpy"]
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import pandas'": [py, "-c", "import pandas"],
            "python -c 'import lark'": [py, "-c", "import lark"],
            "check 50 lines importing the stdlib (--no-cache)": fz + ["check", "--no-cache", str(with_stdlib)],
            "check 50 lines, through typer (--no-cache)": [py, "-c", "from fuzzpy.interfaces.cli import main; main()",
                                                            "check", "--no-cache", str(small)],
            "check 50 lines (--no-cache)": fz + ["check", "--no-cache", str(small)],
            "check 50 lines, cache hit": fz + ["check", str(small)],
            "check 10,000-line file, cache hit": fz + ["check", str(big)],
            "check 10 x 1,000-line project, cache hit": fz + ["check", str(proj)],
        }
        cold = {"check 10,000-line file (--no-cache)": fz + ["check", "--no-cache", str(big)],
                "check 10 x 1,000-line project (--no-cache)": fz + ["check", "--no-cache", str(proj)]}
        for cmd in commands.values():  # fill the cache (and the parser tables)
            subprocess.run(cmd, capture_output=True, env=env, check=True, cwd=tmp)
        medians = interleaved(commands, env, rounds)
        medians.update(interleaved(cold, env, 1))
    base, pandas, lark = medians["python -c pass"], medians["python -c 'import pandas'"], medians["python -c 'import lark'"]
    print(f"\nfrom the shell, median of {rounds} interleaved rounds (cold checks: 1 round):")
    for name, t in medians.items():
        print(f"  {name:<50} {t * 1000:7.0f} ms   {t / pandas:5.2f} x import pandas   {t / lark:5.2f} x import lark"
              f"   {t / base:6.1f} x python -c pass")


def main() -> None:
    argv = sys.argv[1:]
    against = None
    if "--against" in argv:
        against = argv[argv.index("--against") + 1]
        del argv[argv.index("--against"):argv.index("--against") + 2]
    if "--code" in argv:
        del argv[argv.index("--code"):argv.index("--code") + 2]
    args = [a for a in argv if not a.startswith("--")]
    rounds = int(args[0]) if args else 5
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if "--startup" in sys.argv:  # a cold check's start-up alone
        startup(rounds, against)
        return
    if "--shell" in sys.argv:  # the start-up and cache figures alone
        startup_and_cache(rounds)
        return
    import fuzzpy

    print(f"fuzzpy from {Path(fuzzpy.__file__).parent}")
    for lines in (1000, 10000):
        m = measure(lines, repeat=5 if lines <= 1000 else 3)
        print(f"{m['lines']:>6} lines: lark alone {m['floor_per_1000'] * 1000:6.1f} ms / 1,000 lines, "
              f"parse {m['parse_per_1000'] * 1000:6.1f} ms ({1000 / m['parse_per_1000']:,.0f} lines/s, "
              f"{m['parse_ratio']:.2f} x lark alone), check {m['check_per_1000'] * 1000:6.1f} ms / 1,000 lines "
              f"({m['check_ratio']:.2f} x lark alone), LP solves {m['lp_solves']}")
    if "--in-process" not in sys.argv:  # --in-process: the parse and check figures alone
        startup_and_cache(rounds)


if __name__ == "__main__":
    main()

"""The soundness oracle at scale (docs/oracle.md).

    python -m tests.oracle.run_oracle --programs 100000 --jobs 2

Program i is generated from seed (--seed + i) by the same generator as the property test, with
a seeded random source instead of hypothesis (no hypothesis overhead, and every program is
reproducible from its seed).  Each violation's choice sequence is then shrunk, as hypothesis
would shrink it, keeping the same kind of violation; the shortest examples are printed and
saved under tests/oracle/found/.  Exit status 1 when a violation or a checker internal error
was found.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from .choices import RandomChooser, ReplayChooser
from .support import (
    DEPTH_LIMIT,
    FOUND,
    TIMEOUT,
    Case,
    CaseResult,
    Stats,
    describe_finding,
    draw_case,
    finding_kind,
    run_case,
    save_finding,
)

EXAMPLES_PER_KIND = 2  # violations kept per kind and theme and per chunk, for shrinking and display


def run_chunk(args: tuple[int, int, int, float]) -> Stats:
    """Programs seed .. seed + n - 1 (in a worker process)."""
    first, n, depth_limit, timeout = args
    stats = Stats()
    per_kind: dict[tuple[str, str], int] = {}
    for seed in range(first, first + n):
        ch = RandomChooser(seed)
        case = draw_case(ch, depth_limit)
        case.record = ch.record
        res = run_case(case, timeout)
        kinds = {(finding_kind(f), case.program.theme) for f in res.findings}
        keep = any(per_kind.get(k, 0) < EXAMPLES_PER_KIND for k in kinds)
        for k in kinds:
            per_kind[k] = per_kind.get(k, 0) + 1
        stats.add(case, res)
        if kinds and not keep:
            stats.examples.pop()
        if res.status == "internal" and len(stats.internal) > 4:
            stats.internal[-1] = ""  # counted, not kept
    return stats


# ---- shrinking --------------------------------------------------------------------------------

def shrink(record: list[int], kind: str, theme: str, depth_limit: int, timeout: float,
           budget: float) -> tuple[Case, CaseResult]:
    """The shortlex-smallest choice sequence found (within `budget` seconds) whose case still
    shows a violation of this kind, with the same theme (so that violations of one kind but of
    different origins stay apart): blocks deleted, values zeroed, halved and decremented."""
    deadline = time.monotonic() + budget

    def attempt(values: list[int]) -> Optional[tuple[list[int], Case, CaseResult]]:
        ch = ReplayChooser(values)
        case = draw_case(ch, depth_limit)
        if case.program.theme != theme:
            return None
        res = run_case(case, timeout)
        if any(finding_kind(f) == kind for f in res.findings):
            return ch.record, case, res  # the values actually read, clamped to their ranges
        return None

    first = attempt(record)
    if first is None:  # cannot happen for a deterministic case; keep the original
        raise RuntimeError("the violation did not reproduce")
    best, case, res = first
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in _candidates(best):
            if time.monotonic() > deadline:
                break
            if _shortlex(candidate) >= _shortlex(best):
                continue
            got = attempt(candidate)
            if got is not None and _shortlex(got[0]) < _shortlex(best):
                best, case, res = got
                improved = True
                break
    case.record = best
    return drop_unused_functions(case, _only(res, kind), kind, timeout)


def drop_unused_functions(case: Case, res: CaseResult, kind: str, timeout: float) -> tuple[Case, CaseResult]:
    """The program without the helper functions nothing calls, if it shows the same violation
    (the text then no longer comes from `case.record`, which is dropped)."""
    lines = case.program.text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"function (\w+) ", lines[i])
        rest = lines[:i] + lines[i + 1:]
        if not m or m.group(1) == "main" or re.search(rf"\b{m.group(1)}\b", "\n".join(rest)):
            i += 1
            continue
        smaller = replace(case, program=replace(case.program, text="\n".join(rest) + "\n"), record=None)
        got = run_case(smaller, timeout)
        if any(finding_kind(f) == kind for f in got.findings):
            lines, case, res = rest, smaller, _only(got, kind)
        else:
            i += 1
    return case, res


def _shortlex(values: list[int]) -> tuple[int, list[int]]:
    return len(values), values


def _candidates(values: list[int]):
    n = len(values)
    for size in (32, 16, 8, 4, 2, 1):
        for i in range(0, n - size + 1, max(1, size // 2)):
            yield values[:i] + values[i + size:]
    for i in range(n):
        if values[i]:
            yield values[:i] + [0] + values[i + 1:]
    for i in range(n):
        v = values[i]
        if v > 1:
            yield values[:i] + [v // 2] + values[i + 1:]
        if v:
            yield values[:i] + [v - 1] + values[i + 1:]


def _only(res: CaseResult, kind: str) -> CaseResult:
    res.findings = [f for f in res.findings if finding_kind(f) == kind] + \
                   [f for f in res.findings if finding_kind(f) != kind]
    return res


# ---- the command ------------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.oracle.run_oracle", description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=100_000, help="programs to generate (default 100000)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first program (default 0)")
    ap.add_argument("--depth-limit", type=int, default=DEPTH_LIMIT, help=f"shared call-depth limit (default {DEPTH_LIMIT})")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help=f"seconds per run (default {TIMEOUT:g})")
    ap.add_argument("--chunk", type=int, default=50, help="programs per task handed to a worker")
    ap.add_argument("--shrink-seconds", type=float, default=60.0, help="time to shrink each example shown (0: none)")
    ap.add_argument("--show", type=int, default=1, help="violations shown (and saved) per kind")
    ap.add_argument("--save", default=str(FOUND), help="directory for counterexamples ('' for none)")
    args = ap.parse_args(argv)

    tasks = [(s, min(args.chunk, args.seed + args.programs - s), args.depth_limit, args.timeout)
             for s in range(args.seed, args.seed + args.programs, args.chunk)]
    total = Stats()
    t0 = time.perf_counter()
    print(f"soundness oracle: {args.programs} programs from seed {args.seed}, {args.jobs} job(s), "
          f"call-depth limit {args.depth_limit}, {args.timeout:g} s per run", flush=True)
    step, next_report = max(args.programs // 20, 1), 0
    with _pool(args.jobs) as pool:
        for stats in pool.imap_unordered(run_chunk, tasks):
            total.merge(stats)
            if total.generated >= next_report:
                next_report += step
                rate = total.generated / (time.perf_counter() - t0)
                print(f"  {total.generated} programs, {rate:.1f}/s, violations so far: "
                      f"{dict(total.violations) or 0}", flush=True)
    total.seconds = time.perf_counter() - t0
    print(summary(total, args.jobs))
    show_examples(total, args)
    return 1 if total.violations or total.internal else 0


class _Serial:
    """A pool of one: the work runs in this process (no pickling, easy to debug)."""

    def __enter__(self) -> "_Serial":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def imap_unordered(self, fn: Any, items: list) -> Any:
        return map(fn, items)


def _pool(jobs: int) -> Any:
    if jobs <= 1:
        return _Serial()
    return mp.get_context("spawn").Pool(jobs, initializer=_quiet_worker)


def _quiet_worker() -> None:
    """Workers print nothing (the LP solver announces itself on the C-level stdout)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)


def summary(s: Stats, jobs: int) -> str:
    rate = s.generated / s.seconds if s.seconds else 0.0
    rejected = sum(s.rejected.values())
    lines = [
        f"generated {s.generated} programs in {s.seconds:.0f} s ({rate:.1f} programs/s with {jobs} job(s))",
        f"accepted {s.accepted} ({100 * s.accepted / max(s.generated, 1):.0f}%), rejected {rejected}: "
        + ", ".join(f"{c} {n}" for c, n in s.rejected.most_common()),
        f"checker internal errors (E0901): {len(s.internal)}",
        f"pairs of neighbouring tables run: {s.pairs}; runs timed out: {s.timeouts}; "
        f"runtime errors: {len(s.runtime_errors)}",
        "violations (programs): " + (", ".join(f"{k} {n}" for k, n in s.violations.most_common()) or "none"),
    ]
    return "\n".join(lines)


def show_examples(s: Stats, args: argparse.Namespace) -> None:
    for text in [t for t in s.internal if t][:args.show]:
        print("\n# checker internal error (E0901) on:\n" + text)
    for err, text in s.runtime_errors[:args.show]:
        print(f"\n# runtime error {err} on:\n" + text)
    by_kind: dict[str, list[tuple[Case, CaseResult]]] = {}
    for case, res in s.examples:
        by_kind.setdefault(finding_kind(res.findings[0]), []).append((case, res))
    for kind in sorted(by_kind):
        for i, (case, res) in enumerate(_distinct_themes(by_kind[kind], args.show)):
            if args.shrink_seconds > 0 and case.record is not None:
                case, res = shrink(case.record, kind, case.program.theme, args.depth_limit, args.timeout,
                                   args.shrink_seconds)
            print(f"\n# ---- {kind} (theme {case.program.theme}) ----\n" + describe_finding(case, res), flush=True)
            if args.save:
                path = save_finding(case, res, f"{_slug(kind)}-{case.program.theme}", Path(args.save))
                print(f"# saved as {path}")


def _distinct_themes(examples: list[tuple[Case, CaseResult]], n: int) -> list[tuple[Case, CaseResult]]:
    """Up to n examples, the smallest of each program theme first."""
    out, themes = [], set()
    for case, res in sorted(examples, key=lambda cr: len(cr[0].record or [])):
        if case.program.theme not in themes:
            themes.add(case.program.theme)
            out.append((case, res))
    return out[:n]


def _slug(kind: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in kind).strip("-").replace("--", "-")


if __name__ == "__main__":
    sys.exit(main())

"""Auditing speed: the program sampler batched (fuzzpy/audit/batched.py) against one interpreter
run per sample, and whole-program audits of every example.

    python benchmarks/audit_speed.py [--samples 100000] [--limit 90] [--only quickstart,median]
                                     [--no-audit] [--no-throughput] [--calls] [--floor] [--together]
                                     [--rows] [--stages] [--default-malloc]

1. Sampler throughput, per example: samples per second of the batched sampler and of the
   interpreter-per-sample sampler on the same synthetic tables (the auditor's first pair), and
   their ratio, in this process.  "falls back" means the program's structure does not allow
   batching (control flow on released values, mechanism inputs that depend on them).
2. A whole-program audit (`fuzzpy audit PROG`, the default search) at --samples per side of
   each validated pair, each example in its own process with a time limit of --limit seconds;
   programs with Gaussian releases at delta 1e-5.  Prints the wall time and the CPU time of the
   audit process (on a shared machine the CPU time is the steadier figure; goal: under a minute
   at 100,000 samples per side).
3. With --calls (instead of 1 and 2): the batched sampler's median time per call at the audit's
   call sizes, 400 samples (screening a pair) and 10,000 (a chunk), on both sides of six of the
   auditor's pairs. Run at two commits in turn to compare versions.
   The benchmark's own process raises glibc's memory thresholds as `fuzzpy audit` does
   (fuzzpy/interfaces/memory.py); --default-malloc keeps glibc's defaults, to compare.
4. With --floor (instead of 1 and 2), for programs with Gaussian releases: a lower bound on the
   audit's time from the discrete Gaussian draws alone.  The draws per sample are counted on one
   sampler call; the validation stage alone draws the noise of --samples runs when its
   top_pairs x 2 inputs are drawn together (they share each run's noise), else of
   top_pairs x 2 x --samples runs (AuditConfig); the vectorised sampler is timed on calls of
   the audit's size (a 10,000-sample chunk) with the program's own variance.  Whatever else the
   auditor does comes on top.
5. With --together (instead of 1 and 2): a screening stage's draws (both sides of up to 160
   pairs, 400 runs each, from one seed) drawn together in one call (`sampler.many`) against
   input by input, in this process, and whether the outputs are the same bit for bit.
6. With --rows (instead of 1 and 2): a validation call (both sides of three pairs, 10,000 runs
   each, drawn together) and the encoding of its outputs, with number outputs handed to the
   encoder coordinate by coordinate (`outputs.Rows`) against the list of the outputs built as
   values (the path before), in this process, best of 3 each, alternating; and whether the
   two encodings are the same (keys and coordinates).
7. With --stages (instead of 1 and 2): a whole-program audit as in 2, with the seconds from the
   start of the process to the first progress line of each stage (screening, climbing,
   exploring, validating) and to its end.  The audit prints at most a line a second, so a mark
   is within a second of its stage's start, and a shorter stage may show none.
"""

from __future__ import annotations

import argparse
import math
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def throughput(path: Path) -> tuple[float, float, bool]:
    """(batched samples/s, interpreter samples/s, batched ran)."""
    from fuzzpy.audit import batched
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.checking.program import check_file

    report = check_file(path)
    delta = None if report.is_pure else __import__("fractions").Fraction(1, 10**5)
    pair = program_pairs(report, np.random.default_rng(0), 4, delta=delta or 0)[0]
    ran = []
    real = batched.draw_batch

    def spy(*a, **kw):
        out = real(*a, **kw)
        ran.append(True)
        return out

    batched.draw_batch = spy
    try:
        rates = []
        for batch, n, budget in ((True, 10_000, 20.0), (False, 200, 20.0)):
            sampler = program_sampler(report, batch=batch)
            sampler(pair.a, 2, np.random.default_rng(0))  # warm up
            done, t0, size = 0, time.perf_counter(), 50
            while done < n and time.perf_counter() - t0 < budget:
                step = min(n - done, size)
                t1 = time.perf_counter()
                sampler(pair.a, step, np.random.default_rng(done))
                done += step
                if batch:  # about a second per batch, at most 2,000: a slow program is not stuck
                    rate = step / max(time.perf_counter() - t1, 1e-6)  # in one batch past the budget
                    size = int(min(2000, max(50, rate)))
            rates.append(done / (time.perf_counter() - t0))
    finally:
        batched.draw_batch = real
    return rates[0], rates[1], bool(ran)


def call_times(path: Path, pairs: int = 6) -> list[tuple[int, float]]:
    """(call size, median seconds per call) of the batched sampler at the audit's two call sizes
    (400 samples: screening a pair; 10,000: one chunk), one call on each side of each of the
    first pairs (the smaller table, often empty, and the one with the added row)."""
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.checking.program import check_file

    report = check_file(path)
    delta = None if report.is_pure else __import__("fractions").Fraction(1, 10**5)
    chosen = program_pairs(report, np.random.default_rng(0), 40, delta=delta or 0)[:pairs]
    sampler = program_sampler(report, batch=True)
    sampler(chosen[0].a, 2, np.random.default_rng(0))  # warm up
    out = []
    for size in (400, 10_000):
        took = []
        for i, pair in enumerate(chosen):
            for side in (pair.a, pair.b):
                t0 = time.perf_counter()
                sampler(side, size, np.random.default_rng(i))
                took.append(time.perf_counter() - t0)
        out.append((size, float(np.median(took))))
    return out


def gaussian_floor(path: Path, samples: int) -> Optional[tuple[int, int, float, float]]:
    """(discrete Gaussian draws per sample, runs whose noise the validation stage draws, ns per
    draw, seconds for those draws alone), or None when the program draws no discrete Gaussian."""
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.audit.search import AuditConfig
    from fuzzpy.checking.program import check_file
    from fuzzpy.runtime import noise, samplers

    report = check_file(path)
    if report.is_pure:
        return None
    seen: list[tuple[Any, int]] = []
    real = samplers.sample_discrete_gaussian_batch

    def spy(sigma2, n, rng):
        seen.append((sigma2, n))
        return real(sigma2, n, rng)

    pair = program_pairs(report, np.random.default_rng(0), 4, delta=__import__("fractions").Fraction(1, 10**5))[0]
    sampler = program_sampler(report, batch=True)
    noise.sample_discrete_gaussian_batch = spy
    try:
        per_call = 1_000
        sampler(pair.a, per_call, np.random.default_rng(0))
    finally:
        noise.sample_discrete_gaussian_batch = real
    if not seen:
        return None
    per_sample = sum(n for _, n in seen) // per_call
    cfg = AuditConfig(samples=samples)
    together = sampler.many([pair.a, pair.b], 2, np.random.default_rng(0)) is not None
    validated = cfg.samples if together else cfg.top_pairs * 2 * cfg.samples
    sigma2 = max(seen, key=lambda s: s[1])[0]
    step = per_sample * cfg.chunk // max(1, len(seen))  # one mechanism call's draws in a chunk
    rng = samplers.RandomSource.seeded(0)
    real(sigma2, step, rng)  # warm up
    calls, t0 = 0, time.perf_counter()
    while calls < 20 or time.perf_counter() - t0 < 2.0:
        real(sigma2, step, rng)
        calls += 1
    ns = (time.perf_counter() - t0) / (calls * step) * 1e9
    return per_sample, validated, ns, per_sample * validated * ns / 1e9


def together(path: Path, runs: int = 400) -> Optional[tuple[int, float, float, bool]]:
    """(inputs, seconds drawn together, seconds input by input, same outputs) for a screening
    stage's inputs, or None when the program is not drawn together."""
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.checking.program import check_file

    report = check_file(path)
    delta = None if report.is_pure else __import__("fractions").Fraction(1, 10**5)
    pairs = program_pairs(report, np.random.default_rng(1), 160, delta=delta or 0)
    inputs = [x for p in pairs for x in (p.a, p.b)]
    sampler = program_sampler(report, batch=True)
    sampler(inputs[0], 2, np.random.default_rng(0))  # warm up
    t0 = time.perf_counter()
    many = sampler.many(inputs, runs, np.random.default_rng(2))
    t1 = time.perf_counter()
    if many is None:
        return None
    alone = [sampler(x, runs, np.random.default_rng(2)) for x in inputs]
    t2 = time.perf_counter()
    return len(inputs), t1 - t0, t2 - t1, repr(many) == repr(alone)


def rows_call(path: Path, runs: int = 10_000) -> Optional[tuple[float, float, bool]]:
    """(seconds with Rows, seconds with the outputs' list, same encoding) for a validation call,
    or None when the program is not drawn together or its outputs are not numbers in rows."""
    from fuzzpy.audit import batched
    from fuzzpy.audit.outputs import Rows, encode
    from fuzzpy.audit.programs import program_pairs, program_sampler
    from fuzzpy.checking.program import check_file

    report = check_file(path)
    delta = None if report.is_pure else __import__("fractions").Fraction(1, 10**5)
    pairs = program_pairs(report, np.random.default_rng(0), 40, delta=delta or 0)[:3]
    inputs = [x for p in pairs for x in (p.a, p.b)]
    sampler = program_sampler(report, batch=True)
    first = sampler.many(inputs, 2, np.random.default_rng(0))  # warm up
    if first is None or type(first[0]) is not Rows:
        return None
    real = batched._number_rows

    def call(rows: bool) -> tuple[float, list]:
        batched._number_rows = real if rows else (lambda value, n: None)
        try:
            t0 = time.perf_counter()
            encs = [encode(out) for out in sampler.many(inputs, runs, np.random.default_rng(1))]
            return time.perf_counter() - t0, encs
        finally:
            batched._number_rows = real

    best = {True: math.inf, False: math.inf}
    encoded = {}
    for _ in range(3):
        for rows in (True, False):
            took, encoded[rows] = call(rows)
            best[rows] = min(best[rows], took)
    same = all(a.keys.tolist() == b.keys.tolist() and list(a.numeric) == list(b.numeric)
               and all(np.array_equal(a.numeric[k], b.numeric[k], equal_nan=True) for k in a.numeric)
               for a, b in zip(encoded[True], encoded[False]))
    return best[True], best[False], same


STAGES = ("screening", "climbing", "exploring", "validating")


def audit_stages(path: Path, samples: int, limit: float) -> str:
    """The audit of `audit_time`, with the time at which each stage's first progress line came."""
    seen: dict[str, float] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(audit_args(path, samples), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stderr is not None
    for line in proc.stderr:  # progress lines: "fuzzpy audit: <stage> ..."
        if time.perf_counter() - t0 > limit:
            proc.kill()
            return f"> {limit:.0f} s (stopped)"
        for stage in STAGES:
            if stage not in seen and line.startswith(f"fuzzpy audit: {stage}"):
                seen[stage] = time.perf_counter() - t0
    proc.wait()
    end = time.perf_counter() - t0
    marks = "  ".join(f"{stage} {seen[stage]:5.1f}" for stage in STAGES if stage in seen)
    return f"{marks}  end {end:5.1f} s  exit {proc.returncode}"


def audit_args(path: Path, samples: int) -> list[str]:
    """`fuzzpy audit PROG --samples N --seed 1`, at delta 1e-5 for a program with Gaussian releases."""
    from fuzzpy.checking.program import check_file

    args = [sys.executable, "-m", "fuzzpy", "audit", str(path), "--samples", str(samples), "--seed", "1"]
    return args if check_file(path).is_pure else args + ["--delta", "1e-5"]


def audit_time(path: Path, samples: int, limit: float) -> str:
    args = audit_args(path, samples)
    import resource

    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"> {limit:.0f} s (stopped)"
    took, cpu1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    verdict = "violation" if "violation found" in proc.stdout and "no violation" not in proc.stdout else "ok"
    return f"{took:6.1f} s wall, {cpu:6.1f} s CPU  exit {proc.returncode}  ({verdict})"


def _report(progs: list[Path], header: str, measure: Any, missing: str, row: Any) -> None:
    """A table with a line per example: row(*measure(p)), or `missing` where measure gives None."""
    print(header)
    for p in progs:
        got = measure(p)
        print(f"{p.name:28} {missing if got is None else row(*got)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--limit", type=float, default=90.0)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-audit", action="store_true")
    parser.add_argument("--no-throughput", action="store_true", help="only the whole-program audits")
    parser.add_argument("--calls", action="store_true",
                        help="only the batched sampler's time per call of 400 and 10,000 samples (six pairs)")
    parser.add_argument("--floor", action="store_true",
                        help="only the time the discrete Gaussian draws of an audit's validation take alone")
    parser.add_argument("--together", action="store_true",
                        help="only a screening stage's draws, together in one call against input by input")
    parser.add_argument("--rows", action="store_true",
                        help="only a validation call's draws and encoding, with Rows against the outputs' list")
    parser.add_argument("--stages", action="store_true",
                        help="only whole-program audits, with the time each stage starts")
    parser.add_argument("--default-malloc", action="store_true",
                        help="in this process, keep glibc's own thresholds (the audit command raises them)")
    args = parser.parse_args()
    if not args.default_malloc:  # in-process figures as `fuzzpy audit` runs (interfaces/memory.py)
        from fuzzpy.interfaces.memory import keep_freed_memory

        keep_freed_memory()
    names = [n for n in args.only.split(",") if n]
    progs = [p for p in sorted((ROOT / "examples").glob("*.fz")) if not names or p.stem in names]
    print(f"{platform.machine()}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if args.floor:
        print(f"{'example':28} {'draws/sample':>12} {'noised runs':>11} {'ns/draw':>8} {'floor':>9}")
        for p in progs:
            got = gaussian_floor(p, args.samples)
            if got is not None:
                per, validated, ns, secs = got
                print(f"{p.name:28} {per:12,} {validated:11,} {ns:8.1f} {secs:8.1f} s", flush=True)
        return
    if args.together:
        _report(progs, f"{'example':28} {'inputs':>6} {'together':>9} {'one by one':>11} {'ratio':>6}  same outputs",
                together, "not drawn together (input by input)",
                lambda k, fast, slow, same: f"{k:6} {fast:8.2f}s {slow:10.2f}s {slow / fast:6.1f}  {same}")
        return
    if args.rows:
        _report(progs, f"{'example':28} {'rows':>7} {'list':>7} {'ratio':>6}  same encoding",
                rows_call, "not drawn together as rows",
                lambda fast, slow, same: f"{fast:6.2f}s {slow:6.2f}s {slow / fast:6.2f}  {same}")
        return
    if args.stages:
        print(f"seconds from the start of `fuzzpy audit` at {args.samples:,} samples per side")
        for p in progs:
            print(f"{p.name:28} {audit_stages(p, args.samples, args.limit)}", flush=True)
        return
    if args.calls:
        print(f"{'example':28} {'ms/call of 400':>15} {'ms/call of 10,000':>18} {'samples/s':>10}")
        for p in progs:
            (_, small), (big_n, big) = call_times(p)
            print(f"{p.name:28} {1000 * small:15.0f} {1000 * big:18.0f} {big_n / big:10.0f}", flush=True)
        return
    print(f"{'example':28} {'batched/s':>10} {'interp/s':>9} {'x':>6}")
    for p in ([] if args.no_throughput else progs):
        fast, slow, ran = throughput(p)
        note = "" if ran else "  falls back (not batchable)"
        print(f"{p.name:28} {fast:10.0f} {slow:9.0f} {fast / slow:6.1f}{note}", flush=True)
    if args.no_audit:
        return
    print(f"whole-program audit at {args.samples:,} samples per side (limit {args.limit:.0f} s each)")
    for p in progs:
        print(f"{p.name:28} {audit_time(p, args.samples, args.limit)}", flush=True)


if __name__ == "__main__":
    main()

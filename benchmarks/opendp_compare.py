"""Whole-process `fuzzpy run` against OpenDP's Polars API on the same file: time and peak memory.

    python benchmarks/opendp_compare.py --opendp-python /path/to/venv/bin/python \\
        [--rows 10000000] [--repeat 3] [--dir /tmp/fuzzpy-load] [--queries count,sum,mean,histogram] \\
        [--formats parquet,csv]

OpenDP is not a dependency of fuzzpy: install it in its own virtual environment
(`python -m venv /tmp/opendp && /tmp/opendp/bin/pip install "opendp[polars]"`) and give that
environment's Python.  UCI Adult is replicated to `--rows` rows (benchmarks/load_speed.py writes
it once into `--dir`).  For each query and file format, three commands run as separate processes,
interleaved `--repeat` times: `fuzzpy run` with the whole Adult schema, `fuzzpy run` with a schema
declaring only the columns the query reads (what a Polars lazy scan reads by itself), and a script
releasing the same statistic with OpenDP 0.16's `Context` (pure epsilon, Laplace noise, the same
clipping bounds; a margin with the public keys for the histogram).  Printed: the best wall time
and the smallest peak resident memory of each (wait4's ru_maxrss), and fuzzpy's ratios to
OpenDP's, with the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_speed import compile_sources, program, timed  # noqa: E402  (the queries, the data and the child timing)

# name -> the OpenDP query on `ctx` (a Context over the file's lazy frame)
OPENDP_QUERIES = {
    "count": 'ctx.query().filter(pl.col("age") >= 40).select(dp.len())',
    "sum": 'ctx.query().select(pl.col("capital_gain").fill_null(0).dp.sum((0, 5000)))',
    "mean": 'ctx.query().select(pl.col("age").fill_null(17).dp.mean((17, 90)))',
    "histogram": 'ctx.query().group_by("race").agg(dp.len())',
}


def opendp_script(name: str, path: Path) -> str:
    scan = "scan_parquet" if path.suffix == ".parquet" else "scan_csv"
    return f"""
import warnings
warnings.simplefilter("ignore")
import opendp.prelude as dp, polars as pl
dp.enable_features("contrib")
lf = pl.{scan}({str(path)!r})
ctx = dp.Context.compositor(
    data=lf, privacy_unit=dp.unit_of(contributions=1), privacy_loss=dp.loss_of(epsilon=0.1),
    split_evenly_over=1,
    margins=[dp.polars.Margin(max_length=2**32 - 1),
             dp.polars.Margin(by=["race"], invariant="keys", max_length=2**32 - 1)])
print({OPENDP_QUERIES[name]}.release().collect())
"""


def _best(runs: list[tuple[float, float, float]]) -> tuple[float, float]:
    return min(r[0] for r in runs), min(r[2] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opendp-python", required=True, help="the Python of a venv with opendp[polars]")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fuzzpy-load"))
    ap.add_argument("--queries", default=",".join(OPENDP_QUERIES))
    ap.add_argument("--formats", default="parquet,csv")
    args = ap.parse_args()
    load_speed = Path(__file__).resolve().parent / "load_speed.py"
    compile_sources()
    subprocess.run([sys.executable, str(load_speed), "--make-data-only", "--rows", str(args.rows),
                    "--dir", str(args.dir)], check=True)
    files = {"csv": args.dir / f"adult_{args.rows}.csv", "parquet": args.dir / f"adult_{args.rows}.parquet"}
    print(f"{args.rows:,} rows; best of {args.repeat} interleaved runs; whole processes; "
          "ratios are fuzzpy / OpenDP")
    print(f"{'query':<10} {'file':<8} {'OpenDP s':>9} {'full s':>7} {'ratio':>6} {'minimal s':>9} {'ratio':>6} "
          f"{'OpenDP MB':>10} {'full MB':>8} {'ratio':>6} {'minimal MB':>10} {'ratio':>6} {'load':>5}")
    for name in args.queries.split(","):
        progs = {}
        for kind, minimal in (("full", False), ("minimal", True)):
            progs[kind] = args.dir / f"{name}_{kind}.fz"
            progs[kind].write_text(program(name, minimal))
        for fmt in args.formats.split(","):
            data = files[fmt]

            def ours(kind: str) -> list[str]:
                return [sys.executable, "-m", "fuzzpy", "run", str(progs[kind]), "--data", str(data), "--seed",
                        "1", "--param", "eps=0.1", "--budget", "1", "--format", "json"]

            theirs = [args.opendp_python, "-c", opendp_script(name, data)]
            runs = [(timed(theirs, args.dir), timed(ours("full"), args.dir), timed(ours("minimal"), args.dir))
                    for _ in range(args.repeat)]
            (ow, om), (fw, fm), (mw, mm) = (_best([r[i] for r in runs]) for i in range(3))
            load = os.getloadavg()[0]
            print(f"{name:<10} {fmt:<8} {ow:9.2f} {fw:7.2f} {fw / ow:6.2f} {mw:9.2f} {mw / ow:6.2f} "
                  f"{om:10.0f} {fm:8.0f} {fm / om:6.2f} {mm:10.0f} {mm / om:6.2f} {load:5.1f}", flush=True)


if __name__ == "__main__":
    main()

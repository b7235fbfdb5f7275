"""`fuzzpy run --engine dask` against hand-written Dask doing the same query, on generated Parquet.

    python benchmarks/dask_scale.py --rows 100_000_000 --workers 2 --repeat 2
    python benchmarks/dask_scale.py --rows 10_000_000 --scheduler tcp://host:8786 --data /shared/adult-pq

Generates (once, in chunks, never the whole table in memory) a Parquet directory of synthetic
Adult-like rows: files of `--rows-per-file` rows, row groups of `--row-group` rows.  Then, on one
cluster (a local one with `--workers` processes, or `--scheduler`), it runs each query with
`fuzzpy run --engine dask --scheduler ADDR` (a subprocess: the whole pipeline, with a ledger, real
noise, the file hashes and the conformance pass), the same with `--persist`, and the same query
written by hand in Dask (a subprocess too: read_parquet, filter, count / clipped sum / value_counts, numpy Laplace noise),
interleaved, `--repeat` times each.  Every run gets a fresh local cluster (not timed), so each
worker's peak resident memory (ru_maxrss, read on the worker after the run) belongs to that run
alone; the client's peak is the subprocess's own (wait4).  Printed: the median wall time of each side and their
ratio, the largest worker peak of each side and their ratio, and the size the conformed table
would have in one pandas process (summed over partitions by the workers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

EDUCATION = ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
             "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"]
WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov"]
SCHEMA = """schema Adult {
  age : num[17, 90],
  workclass : string,
  education : cat{%s},
  sex : cat{"Male", "Female"},
  hours_per_week : num[1, 99],
  income : cat{"<=50K", ">50K"}
}
""" % ", ".join(f'"{e}"' for e in EDUCATION)
QUERIES = {
    # count and clipped sum of a filtered table (examples/quickstart.fz)
    "count_sum": SCHEMA + """function main (db : bag Adult) : fuzzy (num, num) {
  let adults = filter (fun r -> r.age >= 18) db;
  sample n = laplace 0.1 (count adults);
  sample total = laplace 0.1 (sum (map (fun r -> r.age) adults));
  return (n, total / n)
}""",
    # a histogram over 16 education levels (examples/histogram.fz)
    "histogram": SCHEMA + """function main (db : bag Adult) {
  each (fun g -> sample n = laplace 0.5 (count g); return n) (groupby (fun r -> r.education) db)
}""",
}


# ---- data -------------------------------------------------------------------------------------------

def generate(out: Path, rows: int, per_file: int, row_group: int, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    done, index = 0, 0
    while done < rows:
        n = min(per_file, rows - done)
        table = pa.table({
            "age": rng.integers(17, 91, n),
            "workclass": pa.DictionaryArray.from_arrays(rng.integers(0, len(WORKCLASS), n).astype(np.int32),
                                                        WORKCLASS).cast(pa.string()),
            "education": pa.DictionaryArray.from_arrays(rng.integers(0, len(EDUCATION), n).astype(np.int32),
                                                        EDUCATION),
            "sex": pa.DictionaryArray.from_arrays(rng.integers(0, 2, n).astype(np.int32), ["Male", "Female"]),
            "hours_per_week": rng.integers(1, 100, n),
            "income": pa.DictionaryArray.from_arrays((rng.random(n) < 0.24).astype(np.int32), ["<=50K", ">50K"]),
        })
        pq.write_table(table, out / f"part-{index:05d}.parquet", row_group_size=row_group)
        done += n
        index += 1


def ensure_data(args: argparse.Namespace) -> Path:
    data = Path(args.data) if args.data else Path(tempfile.gettempdir()) / f"fuzzpy-dask-scale-{args.rows}"
    stamp = data / "_rows"
    if not (stamp.exists() and stamp.read_text() == str(args.rows)):
        t = time.perf_counter()
        generate(data, args.rows, args.rows_per_file, args.row_group)
        stamp.write_text(str(args.rows))  # not a data file: the engines read only .parquet files
        print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s into {data}", flush=True)
    return data


# ---- the hand-written side (run as a subprocess: `--hand QUERY`) ---------------------------------

def hand_written(query: str, scheduler: str, data: str) -> dict:
    import dask.dataframe as dd
    from distributed import Client

    rng = np.random.default_rng()
    with Client(scheduler) as client:
        if query == "count_sum":
            df = dd.read_parquet(data, columns=["age"])
            adults = df[df.age >= 18]
            n, total = client.compute([adults.age.count(), adults.age.clip(17, 90).sum()], sync=True)
            return {"n": float(n) + rng.laplace(0, 10), "total": float(total) + rng.laplace(0, 900)}
        df = dd.read_parquet(data, columns=["education"])
        counts = client.compute(df.education.value_counts(), sync=True)
        return {k: float(counts.get(k, 0)) + rng.laplace(0, 2) for k in EDUCATION}


# ---- measuring -----------------------------------------------------------------------------------------

def _worker_peak_kib() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _size(piece: tuple) -> int:
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.engines.dask_engine import _p_read

    report = check_source(QUERIES["count_sum"], "size.fz")
    schema = report.table_schema(report.inputs[0])

    return int(_p_read(piece, schema, "db").memory_usage(deep=True).sum())


def run_child(cmd: list[str]) -> tuple[float, int, str]:
    """Run cmd, return (seconds, its peak RSS in KiB, stdout); the peak is read with wait4."""
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err.read()[-3000:]}")
        return elapsed, usage.ru_maxrss, out.read()


class Cluster:
    """A fresh local cluster per measured run (so each worker's ru_maxrss is that run's peak), or
    an existing scheduler (whose workers' peaks then cover everything they ran before)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.client = self.cluster = None

    def __enter__(self) -> "Cluster":
        from distributed import Client, LocalCluster

        a = self.args
        if a.scheduler:
            self.client = Client(a.scheduler)
        else:
            self.cluster = LocalCluster(n_workers=a.workers, threads_per_worker=a.threads_per_worker,
                                        memory_limit=a.memory_limit, dashboard_address=None, silence_logs=100)
            self.client = Client(self.cluster)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    @property
    def address(self) -> str:
        return self.client.scheduler.address


def measure(args: argparse.Namespace, make_cmd) -> dict:
    with Cluster(args) as c:
        seconds, client_kib, _ = run_child(make_cmd(c.address))
        peaks = c.client.run(_worker_peak_kib)
    return {"s": seconds, "client_mib": client_kib / 1024, "worker_mib": max(peaks.values()) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rows-per-file", type=int, default=10_000_000)
    ap.add_argument("--row-group", type=int, default=1_000_000)
    ap.add_argument("--data", help="Parquet directory (generated if missing or of another size)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads-per-worker", type=int, default=1)
    ap.add_argument("--memory-limit", default="4GiB", help="per local worker")
    ap.add_argument("--scheduler", help="an existing cluster instead of a local one")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--queries", default="count_sum,histogram")
    ap.add_argument("--no-size", dest="size", action="store_false",
                    help="skip the estimate of the table's size in pandas (one more pass)")
    ap.add_argument("--hand", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hand:
        print(json.dumps(hand_written(args.hand, args.scheduler, args.data)))
        return

    data = ensure_data(args)
    on_disk = sum(f.stat().st_size for f in data.glob("*.parquet"))
    with Cluster(args) as c:
        nworkers = len(c.client.scheduler_info()["workers"])
        print(f"{platform.node()} ({os.cpu_count()} cores, "
              f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB), "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.rows:,} rows, {on_disk / 2**20:.0f} MiB of "
              f"Parquet; {nworkers} workers x {args.threads_per_worker} threads", flush=True)
        if args.size:
            in_pandas = sum(c.client.gather(c.client.map(_size, _pieces_of(data))))
            print(f"the conformed table in one pandas process: {in_pandas / 2**30:.2f} GiB", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger.sqlite"
        for name in args.queries.split(","):
            prog = Path(tmp) / f"{name}.fz"
            prog.write_text(QUERIES[name])

            def fuzz_cmd(address: str) -> list[str]:
                return [sys.executable, "-m", "fuzzpy", "run", str(prog), "--engine", "dask", "--scheduler", address,
                        "--data", str(data), "--budget", "1000", "--ledger", str(ledger), "--format", "json"]

            def hand_cmd(address: str) -> list[str]:
                return [sys.executable, __file__, "--hand", name, "--scheduler", address, "--data", str(data)]

            sides = {"fuzzpy": fuzz_cmd, "fuzzpy --persist": lambda a: fuzz_cmd(a) + ["--persist"],
                     "hand-written Dask": hand_cmd}
            runs: dict[str, list[dict]] = {k: [] for k in sides}
            for _ in range(args.repeat):  # interleaved
                for side, make in sides.items():
                    runs[side].append(measure(args, make))
            med = {k: {m: statistics.median(r[m] for r in v) for m in ("s", "client_mib", "worker_mib")}
                   for k, v in runs.items()}
            h = med["hand-written Dask"]
            for side, f in med.items():
                print(f"{name:10s} {side:18s} {f['s']:7.1f} s  worker peak {f['worker_mib']:6.0f} MiB  client peak "
                      f"{f['client_mib']:5.0f} MiB | time x{f['s'] / h['s']:.2f}  worker memory "
                      f"x{f['worker_mib'] / h['worker_mib']:.2f} of hand-written Dask", flush=True)


def _pieces_of(data: Path) -> list:
    from fuzzpy.runtime.engines.dask_engine import _pieces

    return _pieces(sorted(str(f) for f in data.glob("*.parquet")), ["age"], "db")


if __name__ == "__main__":
    main()

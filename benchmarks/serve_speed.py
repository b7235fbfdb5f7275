"""Throughput and latency of the curator service (`fuzzpy serve`), on the examples' Adult sample.

    python benchmarks/serve_speed.py [--requests 200] [--clients 20]

Starts a real server process (SQLite ledger in a temporary folder) and measures, with httpx:
requests per second for a check and for a small run (one noisy count), with 1 client and with
`--clients` concurrent clients; and the latency of a served run against a local one (the same
`fuzzpy run` pipeline in this process, with a ledger of its own, data loaded each time as a
local run does).  Prints each figure and the ratios: concurrent / single throughput, served /
local latency.  Needs the serve extra (`pip install -e ".[serve]"` and httpx).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve.helpers import (ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, Analyst, body,  # noqa: E402
                                 start_server, write_config)


def throughput(server, token: str, path: str, payload: dict, requests: int, clients: int) -> float:
    """Each client keeps one connection and sends its share of the requests one after another."""
    def client(count: int) -> None:
        with server.client(token) as c:
            for _ in range(count):
                r = c.post(path, json=payload)
                assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text[:300]

    client(1)  # warm: the table cache, the checker's first use
    shares = [requests // clients + (i < requests % clients) for i in range(clients)]
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, shares))
    return requests / (time.perf_counter() - start)


def served_latency(server, token: str, payload: dict, repeat: int) -> float:
    times = []
    with server.client(token) as c:
        for _ in range(repeat):
            start = time.perf_counter()
            assert c.post("/v1/run", json=payload).json()["exit_code"] == 0
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def local_latency(folder: Path, program: Path, repeat: int) -> float:
    from fuzzpy.interfaces.cli import run_app

    args = ["run", str(program), "--data", str(ADULT_CSV), "--ledger", str(folder / "local.sqlite"),
            "--format", "json"]
    times = []
    for i in range(repeat + 1):
        sink = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink):
            assert run_app(args) == 0
        if i:  # the first run pays for imports
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fuzzpy-serve-bench-"))
    who = Analyst("bench", caps={"adult": "1000000"})
    config = write_config(folder, "ledger.sqlite", {"adult": (ADULT_CSV, ADULT_SCHEMA, "1000000")}, [who],
                          max_concurrent_runs=args.clients, max_concurrent_checks=args.clients)
    program = folder / "count.fz"
    program.write_text(COUNT_PROGRAM)
    payload = body(COUNT_PROGRAM)
    server = start_server(config)
    try:
        rows = []
        for path, what in (("/v1/check", "check"), ("/v1/run", "small run")):
            one = throughput(server, who.token, path, payload, args.requests, 1)
            many = throughput(server, who.token, path, payload, args.requests, args.clients)
            rows.append((what, one, many))
        served = served_latency(server, who.token, payload, args.repeat)
    finally:
        server.stop()
    local = local_latency(folder, program, args.repeat)
    print(f"requests per second ({args.requests} requests; the server answers on one process)")
    for what, one, many in rows:
        print(f"  {what:10s}  1 client: {one:7.1f}/s   {args.clients} clients: {many:7.1f}/s   "
              f"ratio {args.clients} / 1: {many / one:.2f}")
    print(f"latency of a small run (median of {args.repeat}): served {1000 * served:.1f} ms, "
          f"local {1000 * local:.1f} ms, ratio served / local: {served / local:.2f}")


if __name__ == "__main__":
    main()

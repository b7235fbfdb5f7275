"""Starting real `fuzzpy serve` processes for the curator-service tests, and what they share."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import httpx

from fuzzpy.serve.registry import hash_token, new_token

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ADULT_CSV = EXAMPLES / "data" / "adult_sample.csv"
POINTS_CSV = EXAMPLES / "data" / "points.csv"
# The full Adult schema, as the examples import it: every example's schema reads from it.
ADULT_SCHEMA = re.search(r"^schema Adult \{.*?^\}", (EXAMPLES / "schemas" / "adult.fz").read_text(), re.S | re.M).group(0)


def served_text(path: Path) -> str:
    """An example as an analyst sends it to the service, which reads no file of theirs (E1012): the
    import of the shared schema replaced by the schema itself, on the import's one line, so every
    location in the program (and in its report) stays the same."""
    one_line = " ".join(line.strip() for line in ADULT_SCHEMA.splitlines())
    return re.sub(r'^import "schemas/adult\.fz".*$', lambda m: one_line, path.read_text(), flags=re.M)
POINTS_SCHEMA = "schema Point { x : num[0, 10], y : num[0, 10] }"
START_TIMEOUT_S = 90.0

COUNT_PROGRAM = """# fuzzpy: budget 1
schema Adult { age : num[17, 90] }
param eps : num = 0.1;
function main (db : bag Adult) : fuzzy num {
  sample n = laplace eps (count db);
  return n
}
"""
# Slow at run time (public recursion after the release), quick to check: fib 34 runs for tens of
# seconds even compiled (runtime/compiled.py; fib 30 took 3-4 s, too close to a 2 s limit).
SLOW_PROGRAM = """# fuzzpy: budget 1
schema Adult { age : num[17, 90] }
param k : int = 34;
function fib (n : int) : int { if n < 2 then n else fib (n - 1) + fib (n - 2) }
function main (db : bag Adult) : fuzzy num {
  sample c = laplace 0.1 (count db);
  return (c + fib k)
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Analyst:
    name: str
    role: str = "analyst"
    caps: dict = field(default_factory=dict)
    token: str = field(default_factory=new_token)


def write_config(folder: Path, ledger: str, datasets: dict, analysts: list[Analyst], **limits) -> Path:
    """datasets: name -> (csv path, schema text, cap[, notion]); the cap is a pure epsilon, or, with a
    notion ("delta=1e-6" or "rho"), an epsilon at that delta or a rho."""
    lines = ["[server]", 'host = "127.0.0.1"', f'ledger = "{ledger}"', 'audit_log = "audit.jsonl"']
    lines += [f"{k} = {v}" for k, v in limits.items()]
    for name, (csv, schema, cap, *notion) in datasets.items():
        (folder / f"{name}.fz").write_text(schema + "\n")
        total = [f'rho = "{cap}"'] if notion == ["rho"] else [f'cap = "{cap}"'] + \
            [f'delta = "{n.partition("=")[2]}"' for n in notion]
        lines += ["", f"[datasets.{name}]", f'data = "{csv}"', f'schema = "{name}.fz"', *total]
    for a in analysts:
        caps = ", ".join(f'{d} = "{c}"' for d, c in a.caps.items())
        lines += ["", f"[analysts.{a.name}]", f'token_sha256 = "{hash_token(a.token)}"', f'role = "{a.role}"',
                  f"caps = {{ {caps} }}"]
    path = folder / "curator.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Server:
    config: Path
    port: int
    proc: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: Optional[str] = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120.0, **kw)

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def start_server(config: Path, port: Optional[int] = None, env: Optional[dict] = None) -> Server:
    """`python -m fuzzpy serve --config ...` on a free port; returns once it answers HTTP."""
    port = port or free_port()
    log = config.parent / f"serve-{port}.log"
    proc = subprocess.Popen([sys.executable, "-m", "fuzzpy", "serve", "--config", str(config), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"), env={**os.environ, **(env or {})},
                            cwd=config.parent)
    server = Server(config, port, proc, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fuzzpy serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            httpx.get(f"{server.url}/v1/whoami", timeout=2.0)
            return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.stop(kill=True)
    raise RuntimeError(f"fuzzpy serve did not answer within {START_TIMEOUT_S} s: {log.read_text()[-2000:]}")


def body(program: str, dataset="adult", **kw) -> dict:
    return {"program": program, "file": kw.pop("file", "prog.fz"), "dataset": dataset, **kw}


def codes(response: httpx.Response) -> list[str]:
    return [d["code"] for d in response.json()["diagnostics"]]


def fuzzpy_cli(*args: str, env: Optional[dict] = None, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuzzpy", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd or ROOT, timeout=300)

"""Smoke test of an installed fuzzpy, as a new user meets it (standard library only).

    python .ci/smoke.py [--repo DIR]

Run it with the Python of a fresh virtual environment in which fuzzpy was installed from a
wheel (`.ci/run` does).  It copies the examples to a temporary folder (so nothing of the
repository, its stdlib/ in particular, can be found from there) and, with the `fuzzpy` of that
environment:

* checks and runs every example (text, `--format json`, `--format sarif`), a program that
  imports the standard library, and every command of examples/README.md; stdout of each JSON and SARIF output must parse as one strict JSON value
  (no banner, no NaN/Infinity), and stderr must hold no traceback;
* does one language-server round trip on examples/decision_tree.fz (initialize, didOpen,
  publishDiagnostics, shutdown, exit), reading stdout with strict Content-Length framing:
  any byte outside a frame fails.

The strict client (`StrictLspClient`, `read_frame`) is also used by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional
from urllib.parse import quote

HANG_GUARD_S = 180.0  # only against hangs: a loaded 2-core machine needs a fraction of it
EXAMPLE_DATA = {"kmeans": "points.csv", "kmeans_gauss": "points.csv"}  # every other example reads adult_sample.csv
# No example imports the standard library; this program does (and needs the LP), so the
# smoke job sees the stdlib shipped inside the installed package.
LIBRARY_PROGRAM = """\
import "stdlib/stats.fz"
import "stdlib/select.fz"
import "stdlib/adaptive.fz"

schema Adult { age : num[17, 90], hours_per_week : num[1, 99], sex : cat{"Male", "Female"} }

function main (db : bag Adult) : fuzzy (num, list num, list bool) {
  let ages = map (fun r -> r.age) db;
  sample m = adaptive_mean 0.25 0.25 10 0 [1, 10, 100] ages;
  sample c = cdf_by_intervals 0.25 [30, 50, 70] ages;
  sample s = sparse_vector 0.25 1 500 [20, 40, 60] (fun q r -> r.age < q) db;
  return (m, c, s)
}
"""


class ProtocolError(AssertionError):
    """Bytes on the server's stdout that are not a well-formed LSP frame."""


# ---- strict JSON ---------------------------------------------------------------------------------


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text: str) -> Any:
    """The whole of `text` as one JSON value; NaN and Infinity are refused."""
    return json.loads(text, parse_constant=_no_constants)


# ---- strict LSP framing ----------------------------------------------------------------------------

_HEADER = re.compile(rb"(Content-Length|Content-Type): [^\r\n]*")


def read_frame(stream: BinaryIO) -> Optional[dict]:
    """One LSP message from `stream`, or None at a clean end of stream.  Headers must be
    `Content-Length` (required) or `Content-Type` lines ended by CRLF, then an empty line, then
    exactly Content-Length bytes of a JSON-RPC 2.0 object."""
    headers: dict[bytes, bytes] = {}
    while True:
        line = stream.readline()
        if not line:
            if headers:
                raise ProtocolError("stream ended inside a frame header")
            return None
        if line == b"\r\n":
            break
        if not line.endswith(b"\r\n") or not _HEADER.fullmatch(line[:-2]):
            raise ProtocolError(f"not an LSP header line: {line[:200]!r}")
        name, _, value = line[:-2].partition(b": ")
        headers[name] = value
    if b"Content-Length" not in headers:
        raise ProtocolError("Header must provide a Content-Length property")
    length = int(headers[b"Content-Length"])
    body = stream.read(length)
    if len(body) != length:
        raise ProtocolError("stream ended inside a frame body")
    message = strict_json(body.decode("utf-8"))
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ProtocolError(f"not a JSON-RPC 2.0 message: {body[:200]!r}")
    return message


def write_frame(stream: BinaryIO, message: dict) -> None:
    body = json.dumps(message).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


class StrictLspClient:
    """A language client that fails on any byte of the server's stdout outside a frame."""

    def __init__(self, command: list[str], cwd: Optional[Path] = None, env: Optional[dict] = None):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=env)
        self.messages: "queue.Queue[Any]" = queue.Queue()
        self.stderr = b""
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        try:
            while (message := read_frame(self.proc.stdout)) is not None:
                self.messages.put(message)
            self.messages.put(EOFError("server closed stdout"))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting test
            self.messages.put(exc)

    def _drain_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()

    def send(self, message: dict) -> None:
        write_frame(self.proc.stdin, {"jsonrpc": "2.0", **message})

    def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        rid = self._next_id
        self.send({"id": rid, "method": method, "params": params})
        reply = self.wait(lambda m: m.get("id") == rid and "method" not in m)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, **({"params": params} if params is not None else {})})

    def wait(self, wanted: Callable[[dict], bool], timeout: float = HANG_GUARD_S) -> dict:
        """The next message that satisfies `wanted`; requests from the server are answered."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no matching message from the server in {timeout:g} s") from None
            if isinstance(item, BaseException):
                raise item
            if "method" in item and "id" in item:  # a request of the server (e.g. a refresh)
                self.send({"id": item["id"], "result": None})
            if wanted(item):
                return item

    def finish(self, timeout: float = HANG_GUARD_S) -> int:
        """shutdown, exit; every byte left on stdout must still be frames.  The exit code."""
        self.request("shutdown", None)
        self.notify("exit")
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        try:
            self.wait(lambda m: False, timeout=5)
        except EOFError:
            pass  # stdout ended cleanly after the last frame
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def file_uri(path: Path) -> str:
    return "file://" + quote(path.resolve().as_posix())


def lsp_round_trip(command: list[str], program: Path) -> tuple[list[dict], bytes]:
    """initialize, didOpen `program`, its publishDiagnostics, shutdown and exit, strictly."""
    client = StrictLspClient(command, cwd=program.parent)
    try:
        uri = file_uri(program)
        client.request("initialize", {"processId": os.getpid(), "rootUri": file_uri(program.parent),
                                      "capabilities": {}})
        client.notify("initialized", {})
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "fuzzpy", "version": 1, "text": program.read_text()}})
        published = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                and m["params"]["uri"] == uri)
        code = client.finish()
        if code != 0:
            raise AssertionError(f"the language server exited with {code}")
        return published["params"]["diagnostics"], client.stderr
    finally:
        client.kill()


# ---- the command line ----------------------------------------------------------------------------


def fuzzpy(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(["fuzzpy", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    if "Traceback" in done.stderr or "Traceback" in done.stdout:
        raise AssertionError(f"fuzzpy {shlex.join(args)} printed a traceback:\n{done.stderr}")
    return done


def expect(done: subprocess.CompletedProcess, args: list[str], code: int = 0) -> None:
    if done.returncode != code:
        raise AssertionError(f"fuzzpy {shlex.join(args)} exited {done.returncode}, not {code}:\n"
                             f"{done.stdout}\n{done.stderr}")


# zCDP examples (Gaussian noise): run at delta 1e-6, where they are (0.83, 1e-6)-, (1.37, 1e-6)-
# and (0.995, 1e-6)-DP (DP-SGD's steps on Poisson samples), under a budget of 2.
ZCDP = {"logistic_regression_gauss", "kmeans_gauss", "dpsgd_logistic", "linear_regression_adassp"}
# The flights examples: their tables (public ones with --public) and, for partition selection's
# delta, a delta.
FLIGHTS = "flights=examples/data/flights_sample.csv"
FLIGHTS_RUNS = {
    "delay_by_airline": ["--data", FLIGHTS, "--public", "airlines=examples/data/airlines.csv", "--budget", "1.0"],
    "seats_by_manufacturer": ["--data", FLIGHTS, "--public", "planes=examples/data/planes.csv", "--budget", "1.0"],
    "seats_by_manufacturer_private": ["--data", FLIGHTS, "--data", "planes=examples/data/planes.csv",
                                      "--budget", "1.1"],
    "flights_delay": ["--data", "examples/data/flights_sample.csv", "--budget", "2.0", "--delta", "1e-6"],
}


def check_examples(work: Path, env: dict) -> int:
    """Every example checked (text, JSON, SARIF) and run (text, JSON); the count of commands."""
    count = 0
    (work / "examples" / "library_tour.fz").write_text(LIBRARY_PROGRAM)
    for program in sorted((work / "examples").glob("*.fz")):
        rel = f"examples/{program.name}"
        data = f"examples/data/{EXAMPLE_DATA.get(program.stem, 'adult_sample.csv')}"
        runs = ["run", rel, "--data", data, "--budget", "1.0", "--seed", "1"]
        if program.stem in ZCDP:
            runs = ["run", rel, "--data", data, "--budget", "2.0", "--delta", "1e-6", "--seed", "1"]
        if program.stem in FLIGHTS_RUNS:
            runs = ["run", rel, *FLIGHTS_RUNS[program.stem], "--seed", "1"]
        commands = [(["check", rel], "text"), (["check", rel, "--format", "json"], "json"),
                    (["check", rel, "--format", "sarif"], "sarif"), (runs, "text"),
                    ([*runs, "--format", "json"], "json")]
        for args, kind in commands:
            done = fuzzpy(args, work, env)
            expect(done, args)
            if kind == "json":
                out = strict_json(done.stdout)
                assert out["ok"] is True, (args, out)
            elif kind == "sarif":
                out = strict_json(done.stdout)
                assert out["version"] == "2.1.0" and out["runs"][0]["results"], args
            count += 1
    return count


def readme_commands(work: Path, env: dict) -> int:
    """Every `fuzzpy ...` line of examples/README.md's bash blocks, as a user pastes it."""
    text = (work / "examples" / "README.md").read_text()
    commands = [line.strip() for kind, body in re.findall(r"```(bash|text)\n(.*?)```", text, re.S)
                if kind == "bash" for line in body.splitlines() if line.strip().startswith("fuzzpy ")]
    assert commands, "examples/README.md shows no fuzzpy command"
    for line in commands:
        args = shlex.split(line)[1:]
        expect(fuzzpy(args, work, env), args)
    return len(commands)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    opts = parser.parse_args(argv)
    exe = shutil.which("fuzzpy")
    if exe is None:
        print("smoke: no fuzzpy command on PATH", file=sys.stderr)
        return 1
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzzpy-smoke-") as tmp:
        work = Path(tmp)
        shutil.copytree(opts.repo / "examples", work / "examples")
        env = {**os.environ, "FUZZPY_LEDGER": str(work / "ledger.sqlite")}
        env.pop("FUZZPY_STDLIB", None)
        where = subprocess.run([sys.executable, "-c", "import fuzzpy, sys; print(fuzzpy.__file__)"],
                               cwd=work, capture_output=True, text=True, check=True).stdout.strip()
        if Path(where).resolve().is_relative_to(opts.repo.resolve()):
            print(f"smoke: fuzzpy is imported from the repository ({where}), not from an installed "
                  "package", file=sys.stderr)
            return 1
        n = check_examples(work, env)
        n += readme_commands(work, env)
        diagnostics, _ = lsp_round_trip([exe, "lsp"], work / "examples" / "decision_tree.fz")
        assert diagnostics == [], diagnostics
    print(f"smoke: Python {sys.version.split()[0]}, fuzzpy from {where}: {n} commands and one "
          f"language-server round trip passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

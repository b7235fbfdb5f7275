"""The curator's configuration file (`fuzzpy serve --config curator.toml`).

    [server]
    host = "127.0.0.1"            # listen address; put TLS in a reverse proxy in front
    port = 8470
    name = "the curator's ledger"  # how run output names the ledger
    ledger = "ledger.sqlite"      # a file (relative to this file), or postgresql://...
    audit_log = "audit.jsonl"     # JSON lines; "-" for standard error
    max_request_bytes = 1048576
    max_program_bytes = 262144
    check_seconds = 30
    run_seconds = 120
    workers = 4                   # worker processes that check and run (default: the cores, 2 to 8)
    per_analyst = 1               # an analyst's requests in workers at once
    queue_per_analyst = 8         # an analyst's requests waiting for a worker; more: 429 E1021
    queue_seconds = 30            # the longest wait for a worker: 503 E1015
    max_concurrent_runs = 8       # of the workers, at most this many run (the others check)
    max_concurrent_checks = 8

    [datasets.adult]
    data = "adult.csv"
    schema = "adult.fz"
    cap = "3.0"                   # the dataset's total epsilon (pure, or at `delta`)
    delta = "1e-6"                # optional: the cap holds at this delta; or `rho = "0.5"` instead of cap

    [analysts.alice]
    token_sha256 = "<64 hex digits>"  # `fuzzpy analyst add` prints a token and its hash
    role = "analyst"
    caps = { adult = "1.0" }      # in the dataset's notion (epsilon at its delta, or rho)

Relative paths are read relative to the configuration file.  Every problem is E1017.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import error
from ..ledger import parse_amount

ENV_CONFIG = "FUZZPY_CURATOR_CONFIG"


def _default_workers() -> int:
    import os

    return max(2, min(8, os.cpu_count() or 2))


@dataclass
class Limits:
    max_request_bytes: int = 1024 * 1024
    max_program_bytes: int = 256 * 1024
    check_seconds: float = 30.0
    run_seconds: float = 120.0
    workers: int = field(default_factory=_default_workers)
    per_analyst: int = 1
    queue_per_analyst: int = 8
    queue_seconds: float = 30.0
    max_concurrent_runs: int = 8
    max_concurrent_checks: int = 8


@dataclass
class DatasetEntry:
    name: str
    data: Path
    schema: Path
    cap: Any  # an EpsilonCap (pure, or at a delta) or a RhoCap; None: keep the registered one
    schema_name: Optional[str] = None


@dataclass
class AnalystEntry:
    name: str
    token_sha256: str
    role: str = "analyst"
    caps: dict[str, Fraction] = field(default_factory=dict)


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8470
    name: str = "the curator's ledger"
    ledger: str = ""
    audit_log: str = "-"
    limits: Limits = field(default_factory=Limits)
    datasets: list[DatasetEntry] = field(default_factory=list)
    analysts: list[AnalystEntry] = field(default_factory=list)


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise error("E1017", f"configuration file not found: {path}") from None
    except OSError as exc:
        raise error("E1017", f"cannot read the configuration file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error("E1017", f"the configuration file {path} is not valid TOML: {exc}") from None


def _table(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise error("E1017", f"[{key}] in {where} must be a table")
    return value


def _number(value: Any, what: str, kind: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise error("E1017", f"{what} must be a positive number")
    return kind(value)


def _amount(value: Any, what: str) -> Fraction:
    # Strings or integers only: a TOML float such as 0.1 is not exactly 0.1.
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise error("E1017", f"{what} must be a string such as \"1.0\" or an integer (not a TOML float)")
    return parse_amount(str(value), what)


def _dataset_cap(name: str, entry: dict) -> Any:
    """`cap` (with an optional `delta`) or `rho`: the dataset's total, in its privacy notion."""
    from ..ledger.caps import parse_cap

    unknown = set(entry) - {"data", "schema", "schema_name", "cap", "delta", "rho"}
    if unknown:
        raise error("E1017", f"unknown setting(s) in [datasets.{name}]: {', '.join(sorted(unknown))}")
    if not {"cap", "rho"} & set(entry):
        if "delta" in entry:
            raise error("E1017", f"[datasets.{name}]: delta goes with cap")
        return None
    texts = {key: None if key not in entry else str(_amount(entry[key], f"{key} of dataset {name}"))
             for key in ("cap", "delta", "rho")}
    return parse_cap(texts["cap"], texts["delta"], texts["rho"], code="E1017")


def load_config(path: Path) -> ServeConfig:
    path = Path(path).expanduser().resolve()
    doc = _toml(path)
    base = path.parent
    server = _table(doc, "server", str(path))
    cfg = ServeConfig()
    unknown = set(server) - {"host", "port", "name", "ledger", "audit_log", *Limits.__dataclass_fields__}
    if unknown:
        raise error("E1017", f"unknown setting(s) in [server]: {', '.join(sorted(unknown))}")
    cfg.host = str(server.get("host", cfg.host))
    cfg.port = _number(server.get("port", cfg.port), "port", int)
    cfg.name = str(server.get("name", cfg.name))
    ledger = str(server.get("ledger", "ledger.sqlite"))
    cfg.ledger = ledger if "://" in ledger else str((base / ledger).resolve())
    audit = str(server.get("audit_log", "-"))
    cfg.audit_log = audit if audit == "-" else str((base / audit).resolve())
    for key, default in Limits().__dict__.items():
        if key in server:
            setattr(cfg.limits, key, _number(server[key], key, type(default)))
    for name, entry in _table(doc, "datasets", str(path)).items():
        if not isinstance(entry, dict) or "data" not in entry or "schema" not in entry:
            raise error("E1017", f"[datasets.{name}] needs data = \"FILE\" and schema = \"FILE.fz\"")
        cfg.datasets.append(DatasetEntry(name, base / str(entry["data"]), base / str(entry["schema"]),
                                         _dataset_cap(name, entry), entry.get("schema_name")))
    for name, entry in _table(doc, "analysts", str(path)).items():
        if not isinstance(entry, dict) or "token_sha256" not in entry:
            raise error("E1017", f"[analysts.{name}] needs token_sha256 (the token itself is never written down)")
        caps = entry.get("caps", {})
        if not isinstance(caps, dict):
            raise error("E1017", f"caps of analyst {name} must be a table: caps = {{ adult = \"1.0\" }}")
        cfg.analysts.append(AnalystEntry(name, str(entry["token_sha256"]), str(entry.get("role", "analyst")),
                                         {d: _amount(v, f"cap of {name} on {d}") for d, v in caps.items()}))
    return cfg


def resolve_ledger(config: Optional[Path], ledger: Optional[str]) -> tuple[Optional[ServeConfig], str]:
    """The configuration (if any) and where the store is: --ledger wins over the file's setting.
    With neither, $FUZZPY_CURATOR_CONFIG, then ./curator.toml if it exists, then the default ledger."""
    import os

    from ..ledger import default_ledger_path

    if config is None and os.environ.get(ENV_CONFIG, "").strip():
        config = Path(os.environ[ENV_CONFIG].strip())
    if config is None and Path("curator.toml").is_file():
        config = Path("curator.toml")
    cfg = load_config(config) if config is not None else None
    if ledger:
        where = ledger if "://" in ledger else str(Path(ledger).expanduser().resolve())
    elif cfg is not None:
        where = cfg.ledger
    else:
        where = str(default_ledger_path())
    return cfg, where

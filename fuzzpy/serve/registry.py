"""Registering datasets and analysts, publishing schemas, and what a program's schema must
have in common with a dataset's.

A dataset is registered by name with a data file, a schema from a `.fz` file and a total cap in
the privacy notion the curator chooses (pure epsilon, epsilon at a delta, or zCDP rho); its
analysts' caps are in the same notion.
The file is loaded once against the schema when it is registered (so a file that does not fit
is the curator's error, shown to the curator), and the sha256 of its bytes is recorded: the
service refuses the dataset as soon as the file differs (E1010), until the curator registers
it again.  The dataset's identity in the ledger is its name, never the bytes.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import error, render
from ..typesystem.types import Bool, Cat, Num, Schema, Str
from .store import (
    ROLES,
    AnalystRecord,
    DatasetRecord,
    Store,
    analyst_key,
    dataset_key,
    now,
)

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
TOKEN_PREFIX = "fzp_"


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise error("E1017", f"invalid {what} name {name[:70]!r}: use a letter, then letters, digits, '_', '.' "
                             "or '-' (at most 64 characters)")
    return name


# ---- schemas ------------------------------------------------------------------------------------

def read_schema_file(path: Path, schema_name: Optional[str] = None) -> tuple[Schema, str]:
    """The schema declared in a `.fz` file and the text of its declaration (what is published)."""
    from ..checking.program import check_source
    from ..syntax import ast as A
    from ..syntax.loader import read_source
    from ..syntax.parser import parse_module

    text, err = read_source(Path(path))
    if err is not None:
        raise error("E1017", f"schema file: {err.message}")
    report = check_source(text, str(path), entry=None)
    if not report.ok:
        shown = "\n".join(render(d, report.sources) for d in report.diagnostics if d.severity == "error")
        raise error("E1017", f"the schema file {path} has errors:\n{shown}")
    names = sorted(report.schemas)
    if schema_name is None:
        if len(names) != 1:
            declared = ", ".join(names) or "none"
            raise error("E1017", f"the schema file {path} declares {len(names)} schemas ({declared}); "
                                 "name one with --schema-name")
        schema_name = names[0]
    if schema_name not in report.schemas:
        raise error("E1017", f"the schema file {path} declares no schema {schema_name!r}")
    module, _ = parse_module(text, str(path))
    decl = next(d for d in module.decls if isinstance(d, A.SchemaDecl) and d.name == schema_name)
    return report.schemas[schema_name], _span_text(text, decl.span)


def _span_text(text: str, span: Any) -> str:
    lines = text.splitlines()[span.line - 1:span.end_line]
    lines[-1] = lines[-1][:span.end_col - 1]
    lines[0] = lines[0][span.col - 1:]
    return "\n".join(lines).rstrip()


@functools.lru_cache(maxsize=64)
def published_schema(source: str) -> Schema:
    """The schema of a published declaration (as stored in the registry)."""
    from ..checking.program import check_source

    report = check_source(source, "<published schema>", entry=None)
    if not report.ok or len(report.schemas) != 1:
        raise error("E1017", "a registered schema no longer checks; the curator must register the dataset again")
    return next(iter(report.schemas.values()))


def schema_json(rec: DatasetRecord) -> dict:
    schema = published_schema(rec.schema_source)
    return {"dataset": rec.name, "schema": rec.schema_name, "source": rec.schema_source, "unit": schema.unit,
            "columns": [{"name": c.name, "type": str(c.type), "on_invalid": c.on_invalid,
                         "default": None if c.default is None else str(c.default)} for c in schema.columns],
            "registered_at": rec.registered_at}


def schema_problems(program: Schema, registered: Schema) -> list[str]:
    """Why a program's table schema cannot read the registered dataset (empty: it can).

    Each column the program declares must be a registered column read the same way, so that
    loading can never fail on the data (a failure would tell something about the rows):
    numbers as numbers (`int` only over an `int` column), booleans as booleans, categories and
    strings as categories or strings.  Bounds, category sets and missing-value policies may
    differ: loading conforms the data to the program's declaration (docs/data.md); but a
    category set must share a value with the published one, else no row could be read."""
    problems = _unit_problems(program, registered)
    for col in program.columns:
        have = registered.column(col.name)
        if have is None:
            problems.append(f"column '{col.name}' is not in the published schema {registered.name}")
        elif not _reads_as(col.type, have.type):
            problems.append(f"column '{col.name}' is declared {col.type}, but the published schema has {have.type}")
        elif _no_shared_category(col.type, have.type):
            problems.append(f"column '{col.name}' is declared {col.type}, which shares no value with the published "
                            f"{have.type}: loading would drop every row (or set every value to the default)")
    return problems


# rule Units: the curator's unit is the one every program's guarantee is about
def _unit_problems(program: Schema, registered: Schema) -> list[str]:
    """A program must declare the published privacy unit, and no other: without it, its epsilon
    would be per row on a dataset whose cap is per unit (one unit may have many rows); with a unit
    the curator did not publish, per unit on a cap that is per row (removing one row changes a
    unit's rows: two units' moves)."""
    have, want = getattr(registered, "unit", None), getattr(program, "unit", None)
    if have == want:
        return []
    if have is None:
        return [f"the published schema {registered.name} has no privacy unit (one row is one individual); "
                f"declare the schema without `unit {want}`"]
    return [f"the published schema {registered.name} has the privacy unit {have}: declare it, "
            f"schema {program.name} unit {have} {{ ... }}"]


# Empty tables (docs/data.md): a program that cannot read any published value is refused from the schemas alone
def _no_shared_category(want: Any, have: Any) -> bool:
    """Both are categories and no declared value of the program's is declared by the published
    schema: no row the curator's schema accepts has a value the program reads."""
    return isinstance(want, Cat) and isinstance(have, Cat) and not set(want.values) & set(have.values)


def _reads_as(want: Any, have: Any) -> bool:
    if isinstance(want, Num):
        return isinstance(have, Num) and (have.integer or not want.integer)
    if isinstance(want, Bool):
        return isinstance(have, Bool)
    if isinstance(want, (Cat, Str)):
        return isinstance(have, (Cat, Str))
    return False


# ---- datasets -----------------------------------------------------------------------------------

def is_public_table(rec: DatasetRecord) -> bool:
    """Whether a registered dataset is a public table: its published schema is a `public schema`."""
    from ..typesystem.types import PublicSchema

    return isinstance(published_schema(rec.schema_source), PublicSchema)


def register_dataset(store: Store, name: str, data: Path, schema_file: Path, cap: Any,
                     schema_name: Optional[str] = None, public: bool = False) -> DatasetRecord:
    """Validate and record a dataset; set its total cap when one is given (`set_dataset_cap`).
    `public`: a public table (its schema a `public schema`, no cap, never charged), whose declared
    keys are verified now, and again on every run that joins with it."""
    from ..runtime.data import load_identified
    from ..typesystem.types import PublicSchema

    check_name(name, "dataset")
    schema, source = read_schema_file(schema_file, schema_name)
    data = Path(data).expanduser().resolve()
    if public or isinstance(schema, PublicSchema):
        return _register_public(store, name, data, schema, source, cap, public)
    if cap is None and store.cap(dataset_key(name)) is None:
        raise error("E1017", f"dataset {name} has no cap yet: give one with --cap (or --rho)")
    if cap is not None:
        notion_change_problem(store, name, store.cap_of(dataset_key(name)), as_cap(cap))
    # The curator's own file: its errors are shown to the curator.  The identity is the hash of
    # exactly the bytes that were validated.
    frame, identity = load_identified(data, schema, table=name)
    if len(frame) == 0:  # Empty tables (docs/data.md): the curator holds the data, so the curator is told
        raise error("E1017", f"dataset {name} would be empty: {data} has no rows, or the schema's missing-value "
                             "policies drop every row", None,
                    f"fuzzpy data check --data {data} {schema_file} shows which column drops them")
    rec = DatasetRecord(name, str(data), schema.name, source, identity, now())
    store.put_dataset(rec)
    if cap is not None:
        set_dataset_cap(store, name, cap)
    return rec


def _register_public(store: Store, name: str, data: Path, schema: Any, source: str, cap: Any,
                     public: bool) -> DatasetRecord:
    from ..pipeline.public import verify_keys
    from ..runtime.data import load_identified
    from ..typesystem.types import PublicSchema

    if not public:
        raise error("E1017", f"schema {schema.name} is a public schema: register its table with --public")
    if not isinstance(schema, PublicSchema):
        raise error("E1017", f"--public needs a public schema (public schema {schema.name} {{ ... }}); "
                             f"{schema.name} is the schema of a private table")
    if cap is not None:
        raise error("E1017", "a public table has no cap: it is never charged")
    old = store.dataset(name)
    if old is not None and not is_public_table(old):
        raise error("E1017", f"dataset {name} is registered as a private dataset; a public table needs another name")
    frame, identity = load_identified(data, schema, table=name)
    verify_keys(frame, schema, name)  # the curator's own file: told now, not at an analyst's run
    rec = DatasetRecord(name, str(data), schema.name, source, identity, now())
    store.put_dataset(rec)
    return rec


def as_cap(cap: Any) -> Any:
    """An EpsilonCap or a RhoCap; a plain number is a pure epsilon cap."""
    from ..accounting import EpsilonCap, RhoCap

    return cap if isinstance(cap, (EpsilonCap, RhoCap)) else EpsilonCap(Fraction(cap), Fraction(0))


def set_dataset_cap(store: Store, name: str, cap: Any) -> None:
    """Set a dataset's total cap, and put its analysts' caps into the same notion (their amounts
    unchanged): the notion of a dataset is the curator's, and every account on it shares it."""
    from ..ledger.caps import cap_amount, same_notion

    cap = as_cap(cap)
    notion_change_problem(store, name, store.cap_of(dataset_key(name)), cap)
    store.set_cap(dataset_key(name), cap, name)
    for analyst in store.analysts():
        key = analyst_key(analyst.name, name)
        old = store.cap_of(key)
        if old is not None and not _same_notion(old, cap):
            store.set_cap(key, same_notion(cap, cap_amount(old)))


# rule Notion: a spent dataset's notion may only be tightened
def notion_change_problem(store: Store, name: str, old: Any, new: Any) -> None:
    """Once a dataset has spending, its notion may only be tightened: an epsilon cap at a delta
    may get a smaller delta, nothing else changes notion (E1017).  A larger delta, or another
    notion, would restate what was already spent under a weaker guarantee."""
    from ..ledger.caps import describe_cap, is_rho_cap

    if old is None or _same_notion(old, new) or not store.entries(dataset_key(name)):
        return
    if not is_rho_cap(old) and not is_rho_cap(new) and new.delta < old.delta:
        return
    raise error("E1017", f"dataset {name} has spending under a cap in {describe_cap(old)}; its notion can only be "
                         f"tightened (a smaller delta), not changed to {describe_cap(new)}",
                None, "register the data under a new dataset name to budget it in another notion")


def _same_notion(a: Any, b: Any) -> bool:
    from ..ledger.caps import is_rho_cap

    if is_rho_cap(a) or is_rho_cap(b):
        return is_rho_cap(a) and is_rho_cap(b)
    return a.delta == b.delta


def same_registration(old: Optional[DatasetRecord], data: Path, schema_source: str, schema_name: str) -> bool:
    return (old is not None and old.data_path == str(Path(data).expanduser().resolve())
            and old.schema_source == schema_source and old.schema_name == schema_name)


# ---- analysts and tokens ------------------------------------------------------------------------

def new_token() -> str:
    """256 random bits: hashing them with plain sha256 is enough (nothing to guess)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def find_analyst(analysts: list[AnalystRecord], token: str) -> Optional[AnalystRecord]:
    """The analyst whose token this is.  Every stored hash is compared, in constant time each,
    and the loop never stops early: the time taken does not depend on which one matches."""
    digest = hash_token(token)
    found = None
    for rec in analysts:
        if hmac.compare_digest(rec.token_hash, digest):
            found = rec
    return found


def add_analyst(store: Store, name: str, role: str = "analyst", token_hash: Optional[str] = None,
                caps: Optional[dict[str, Fraction]] = None, new: bool = False) -> Optional[str]:
    """Create or update an analyst; returns a new token when one was made (shown once)."""
    from ..ledger.caps import same_notion

    check_name(name, "analyst")
    if role not in ROLES:
        raise error("E1017", f"invalid role {role!r}: analyst or curator")
    old = {a.name: a for a in store.analysts()}.get(name)
    token = None
    if token_hash is None:
        if old is not None and not new:
            token_hash = old.token_hash
        else:
            token = new_token()
            token_hash = hash_token(token)
    elif not re.fullmatch(r"[0-9a-f]{64}", token_hash):
        raise error("E1017", f"token_sha256 of analyst {name} must be 64 lower-case hex digits")
    store.put_analyst(AnalystRecord(name, token_hash, role, old.created_at if old else now()))
    for dataset, amount in (caps or {}).items():
        check_name(dataset, "dataset")
        # In the dataset's notion: epsilon at its delta, or rho (pure epsilon before it is registered).
        store.set_cap(analyst_key(name, dataset), same_notion(store.cap_of(dataset_key(dataset)), Fraction(amount)),
                      f"{name} on {dataset}")
    return token

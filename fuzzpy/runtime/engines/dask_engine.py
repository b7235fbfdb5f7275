"""The Dask engine: a checked program over a partitioned table on a `dask.distributed` cluster.

The interpreter runs on the client exactly as with pandas; only the entry point's tables are
different.  Each is a `DaskBag` (dask_tables.py): a lazy Dask DataFrame whose partitions are
conformed to the schema by the pandas engine's own code (`runtime/data.load_frame`, one
partition at a time).  A bag primitive given such a table runs its Dask evaluator, registered
with its other evaluators (runtime/kernels/): lazy per-partition steps (filter, map, split,
groupby parts), or an aggregate where every partition returns an exact partial result (an int
count, the exact `Fraction` total of `sum` and `vsum` on the fixed grid of runtime/sums.py,
per-key counts) and the client adds the partials as Python ints and Fractions.  Integer
addition is exact and associative, so the total is the same number as the pandas engine's,
whatever the partitioning or the order in which partitions finish: the mechanisms then draw
the same noise from the same seed (docs/scale.md).  Noise is only ever drawn on the client; a
task the cluster recomputes (after a worker died) returns the same exact partial.

Primitives that take a table and have no Dask evaluator (registered dask=Refused(reason)) are
refused by name (E2101): before the charge when the program's code calls them at all
(`unsupported_primitives`), and at run time as a backstop.  Nothing ever collects a whole table
into this process.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd

from ...diagnostics import Diagnostic, FuzzError, error
from ...primitives.registry import PASSES_TABLES, Refused, all_primitives
from ...typesystem import ir as I
from .. import kernels  # noqa: F401 - every primitive's Dask evaluator (or refusal), read from its declaration
from ..state import Context
from ..values import holds
from . import Engine
from .dask_tables import (
    KEPT,
    DaskBag,
    DaskRunFailure,
    TableUsedOnWorker,
    captured_table,
)

CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".data", ".test")
PARQUET_SUFFIXES = (".parquet", ".pq")
_SILENT = 100  # above logging.CRITICAL: nothing is logged
_HIDDEN = ("no details are shown because they could depend on the data")


Keep = Optional[frozenset]  # the columns a table keeps (runtime/columns.py); None: all


# ---- reading: every partition computed from one hashed read of its whole file --------------------

class DataChanged(Exception):
    """A file read again during the run (a later pass, or Dask recomputing lost data) is not the
    file that was hashed and charged."""


def _diagnostics(exc: FuzzError) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in exc.diagnostics]


# rule Engines
def _read_bytes(path: str, table: str) -> tuple[bytes, str]:
    """The file's bytes (one read: only a regular file, as the pandas engine opens it) and the
    identity of exactly those bytes."""
    from ..files import NotARegularFile, identity, open_regular

    where = f"data file '{path}' for table '{table}'"
    try:
        with open_regular(Path(path)) as fh:
            data = fh.read()
    except FileNotFoundError:
        raise error("E0501", f"{where} does not exist") from None
    except NotARegularFile:
        raise error("E0502", f"{where} is a directory or not a regular file") from None
    except OSError:
        raise error("E0502", f"{where} cannot be read") from None
    return data, identity(hashlib.sha256(data))


def _p_footer(path: str, table: str) -> Any:
    """(row groups, column names) from a Parquet file's footer, read on a worker, or its data-free
    diagnostics.  Only the footer: the partitions read, and hash, the whole file."""
    import pyarrow.parquet as pq

    from ..files import NotARegularFile, open_regular

    where = f"data file '{path}' for table '{table}'"
    try:
        with open_regular(Path(path)) as fh:
            meta = pq.ParquetFile(fh).metadata
            return meta.num_row_groups, list(meta.schema.to_arrow_schema().names)
    except FileNotFoundError:
        return [("E0501", f"{where} does not exist")]
    except NotARegularFile:
        return [("E0502", f"{where} is a directory or not a regular file")]
    except Exception:  # noqa: BLE001 - a reader's text is not ours
        return [("E0502", f"{where} is not a readable Parquet file")]


# rule Engines
def _p_group(piece: tuple[str, int], schema: Any, table: str, kept: Keep = None) -> tuple[pd.DataFrame, str]:
    """One row group (-1: the whole file, for a file without any) conformed by the pandas engine's
    own rules (`load_arrow`), parsed from one read of the whole file, and the identity of the
    bytes read.  Text is read plain, not dictionary-encoded: free text, where every cell differs,
    conforms faster so (measured on the benchmark's wide schema)."""
    path, group = piece
    raw, ident = _read_bytes(path, table)
    return _conformed_group(raw, group, schema, table, kept), ident


def _conformed_group(raw: bytes, group: int, schema: Any, table: str, kept: Keep = None) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..data import load_arrow

    names = [c.name for c in schema.columns]
    f = pq.ParquetFile(pa.BufferReader(raw))
    data = f.read(columns=names) if group < 0 else f.read_row_group(group, columns=names)
    return load_arrow(data, schema, table=table, keep=kept)


# rule Engines
def _p_group_again(piece: tuple[str, int, str], schema: Any, table: str, kept: Keep = None) -> pd.DataFrame:
    """A later pass over a row group: the file is read again, and must be the file that was
    charged (its identity the same), else the run stops instead of giving a value."""
    path, group, charged = piece
    raw, ident = _read_bytes(path, table)
    if ident != charged:  # compared before parsing: nothing of another file is conformed
        raise DataChanged()
    return _conformed_group(raw, group, schema, table, kept)


def _p_csv(path: str, schema: Any, table: str, header: bool, kept: Keep = None) -> tuple[pd.DataFrame, str]:
    """A whole CSV file conformed by the pandas engine's own loader (`load_identified`: its header,
    delimiter, quoting and limits, as for a single file), hashed while it is read."""
    from ..data import load_identified

    return load_identified(path, schema, table=table, header=header, keep=kept)


# rule Engines
def _p_csv_again(piece: tuple[str, str], schema: Any, table: str, header: bool,
                 kept: Keep = None) -> pd.DataFrame:
    """A later pass over a CSV file: read, hashed and conformed again; a file that is not the one
    charged (its identity differs) stops the run instead of giving a value."""
    path, charged = piece
    frame, ident = _p_csv(path, schema, table, header, kept)
    if ident != charged:
        raise DataChanged()
    return frame


def _guarded(read: Callable[..., Any], keep: bool, *args: Any) -> tuple[Any, Any, Any, bool]:
    """(the partition if `keep`, its identity or None, None, whether it has a row) when it
    conforms, else (None, None, its data-free diagnostics or "internal", False)."""
    try:
        out = read(*args)
    except FuzzError as exc:
        return None, None, _diagnostics(exc), False
    except Exception:  # noqa: BLE001 - its text could quote a cell
        return None, None, "internal", False
    part, ident = out if isinstance(out, tuple) else (out, None)
    return (part if keep else None), ident, None, len(part) > 0


def _p_checked_group(piece: tuple[str, int], schema: Any, table: str, keep: bool,
                     kept: Keep = None) -> tuple[Any, Any, Any, bool]:
    return _guarded(_p_group, keep, piece, schema, table, kept)


def _p_checked_csv(path: str, schema: Any, table: str, keep: bool, header: bool,
                   kept: Keep = None) -> tuple[Any, Any, Any, bool]:
    return _guarded(_p_csv, keep, path, schema, table, header, kept)


def _summary(result: tuple[Any, Any, Any, bool]) -> tuple[Any, Any, bool]:
    """(identity, problems, whether it has a row) of a checked partition: what travels to the
    client (docs/data.md, "Empty tables": one bit per partition, for the data's holder)."""
    return result[1], result[2], result[3]


# rule Engines
def _partition(result: tuple[Any, Any, Any], charged: str) -> Any:
    """A kept partition.  If Dask recomputed it (its worker died), it was read again from disk:
    it must come from the bytes that were charged."""
    if result[1] != charged:
        raise DataChanged()
    return result[0]


# ---- the engine ----------------------------------------------------------------------------------

class DaskEngine(Engine):
    """A `distributed.Client` (on a local cluster it started, or an existing scheduler)."""

    def __init__(self, client: Any, cluster: Any = None):
        self.client = client
        self.cluster = cluster
        # The columns the program reads (runtime/columns.py); None: every column.  Tables keep
        # only these, and `union` compares and joins only these.
        self.columns: Keep = None
        self.empty: set[str] = set()  # the tables whose checking pass kept no row (docs/data.md, "Empty tables")

    @classmethod
    def start(cls, scheduler: Optional[str] = None, workers: Optional[int] = None,
              threads: Optional[int] = None, processes: bool = True,
              memory_limit: Any = "auto") -> "DaskEngine":
        import logging

        import dask
        from distributed import Client, LocalCluster

        # Partitions keep pandas' own dtypes (object strings), as the pandas engine has them.
        dask.config.set({"dataframe.convert-string": False})
        # Dask logs a failed task with its exception, whose text can quote a cell, and prints
        # tracebacks when it loses the scheduler: nothing of it reaches this process's output
        # (nor a local worker's).  Our own messages say what failed.
        for name in ["distributed", *logging.root.manager.loggerDict]:
            if name == "distributed" or name.startswith("distributed."):
                logging.getLogger(name).setLevel(_SILENT)
        try:
            if scheduler is not None:
                return cls(Client(scheduler, timeout=20, set_as_default=False))
            cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=processes,
                                   dashboard_address=None, memory_limit=memory_limit, silence_logs=_SILENT)
            return cls(Client(cluster, set_as_default=False), cluster)
        except Exception:  # noqa: BLE001 - nothing private here, but the text is not ours
            where = f"the Dask scheduler at '{scheduler}'" if scheduler else "a local Dask cluster"
            raise error("E2106", f"could not connect to {where}", None,
                        "nothing was read and nothing was charged") from None

    def close(self) -> None:
        for thing in (self.client, self.cluster):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass

    # -- computing -----------------------------------------------------------------------------

    def partials(self, frame: Any, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """fn(partition, *args) for every partition, computed on the cluster, in partition order."""
        from dask import delayed

        return self.gathered([delayed(fn, pure=False)(p, *args) for p in frame.to_delayed()])

    def gathered(self, tasks: list[Any]) -> list[Any]:
        """The results of delayed tasks computed on the cluster, in order (a failure of the
        cluster, or a changed data file, stops the run as for `partials`)."""
        try:
            return list(self.client.gather(self.client.compute(tasks)))
        except TableUsedOnWorker:
            raise captured_table() from None
        except DataChanged:
            raise DaskRunFailure("E2107", "a data file changed during the run: it is not the file that was checked "
                                          "and charged", None, KEPT) from None
        except (OSError, TimeoutError) as exc:
            raise _cluster_failure() from exc
        except Exception as exc:  # noqa: BLE001
            if _is_cluster_error(exc):
                raise _cluster_failure() from None
            raise

    def bag(self, frame: Any, group: Optional[Any] = None, part: int = -1, unit: Optional[str] = None) -> DaskBag:
        return DaskBag(self, frame, group, part, unit)

    # -- the interpreter's hook ------------------------------------------------------------------

    def call_prim(self, interp: Any, prim: Any, node: Any, args: list[Any]) -> Any:
        dask = prim.dask  # the primitive's own evaluator here (runtime/kernels/), or what stands in for it
        if dask is PASSES_TABLES or not any(holds(a, DaskBag) for a in args):
            return NotImplemented
        if not callable(dask):  # NO_TABLE given a table anyway, or Refused
            raise DaskRunFailure("E2101", f"primitive {prim.name} cannot run on the Dask engine (it takes a table); "
                                          "run the program with --engine pandas", node.span, KEPT)
        ctx = Context(interp, node.info, node.span)
        return dask(self, ctx, interp.state.vectorise, *args)

    # -- tables ------------------------------------------------------------------------------------

    # rule Engines
    def open_table(self, files: list[str], schema: Any, table: str, persist: bool = False,
                   header: bool = False) -> tuple[DaskBag, str]:
        """The table of `files` conformed to `schema`, and its identity on the ledger.

        Every pass reads a partition's whole file once and hashes the bytes it parses (no
        separate hashing pass).  The checking pass conforms every partition (one per Parquet row
        group, one per CSV file), so a bad file is refused before anything is charged, as on the
        pandas engine, and its hashes are the identity charged (a file's row groups must agree on
        it).  Later passes never compute from other bytes:
        persist=True: the conformed partitions of the checking pass stay on the workers (spilled
        to their disks beyond their memory targets) and every later pass starts from them.
        persist=False: each pass reads and conforms the files again, and a file whose hash is not
        the charged one stops the run (E2107).
        header: every CSV file starts with a header naming every declared column (`--header`)."""
        from ..data import load_frame

        names, cols = [c.name for c in schema.columns], self.columns
        meta = load_frame(pd.DataFrame({n: pd.Series([], dtype=object) for n in names}), schema, table=table)
        meta = meta if cols is None else meta[[n for n in names if n in cols]]
        with self._checking():
            if files[0].lower().endswith(PARQUET_SUFFIXES):
                pieces = self._row_groups(files, names, table)
                checked = [self.client.submit(_p_checked_group, p, schema, table, persist, cols, pure=False)
                           for p in pieces]
                by_file = _agreed(pieces, self._refuse_bad(checked, table), table)
                identities, charged = [by_file[f] for f in files], [by_file[f] for f, _ in pieces]
                again, again_pieces, kw = _p_group_again, [(f, g, by_file[f]) for f, g in pieces], {}
            else:
                checked = [self.client.submit(_p_checked_csv, f, schema, table, persist, header, cols, pure=False)
                           for f in files]
                identities = charged = self._refuse_bad(checked, table)
                again, again_pieces, kw = _p_csv_again, list(zip(files, identities)), {"header": header}
        ident = _combined(identities)
        if persist:
            parts = self.client.map(_partition, checked, charged, pure=False)
            return self.bag(_from_parts(parts, meta)), ident
        del checked  # nothing of the checking pass is kept on the workers
        return self.bag(_from_map(again, again_pieces, meta, schema=schema, table=table, kept=cols, **kw)), ident

    def _row_groups(self, files: list[str], names: list[str], table: str) -> list[tuple[str, int]]:
        """The partitions of Parquet files: (file, row group), or (file, -1) for a file without
        any (so that every file is read, and hashed, by some partition).  The footers are read on
        the workers: the client never opens a data file."""
        footers = self.client.gather(self.client.map(_p_footer, files, table=table, pure=False))
        bad = [d for info in footers if isinstance(info, list) for d in info]
        if bad:
            raise FuzzError([Diagnostic(c, m, None, ["nothing was charged"])
                             for c, m in dict.fromkeys(map(tuple, bad))])
        pieces = []
        for f, (groups, present) in zip(files, footers):
            missing = [n for n in names if n not in present]
            if missing:
                raise error("E0503", f"column(s) {', '.join(repr(n) for n in missing)} of table '{table}' not "
                                     f"found in data file '{f}'; columns in the file: {', '.join(present)}")
            if groups:
                pieces.extend((f, g) for g in range(groups))
            else:
                pieces.append((f, -1))
        return pieces

    def _refuse_bad(self, checked: list[Any], table: str) -> list[Any]:
        """The identities of the checked partitions; any refusal (E05xx, data-free) or unreadable
        partition (E2103: the reader's own text is never shown) stops the run, uncharged."""
        summaries = self.client.gather(self.client.map(_summary, checked, pure=False))
        diags: dict[tuple[str, str], None] = {}
        for _, p, _ in summaries:
            if p == "internal":
                raise error("E2103", f"the data files for table '{table}' could not be read (malformed file); "
                                     + _HIDDEN, None, "nothing was charged")
            for d in p or ():
                diags[tuple(d)] = None
        if diags:
            raise FuzzError([Diagnostic(c, m, None, ["no budget has been spent"]) for c, m in diags])
        if not any(rows for _, _, rows in summaries):
            self.empty.add(table)
        return [ident for ident, _, _ in summaries]

    @contextlib.contextmanager
    def _checking(self) -> Any:
        try:
            yield
        except FuzzError:
            raise
        except Exception as exc:  # noqa: BLE001 - nothing from the data, but the text is not ours
            if _is_cluster_error(exc) or isinstance(exc, (OSError, TimeoutError)):
                raise error("E2106", "the Dask cluster failed while reading the data; nothing was charged") \
                    from None
            raise


# rule Engines
def _agreed(pieces: list[tuple[str, int]], identities: list[str], table: str) -> dict[str, str]:
    """Each file's identity, from its partitions' reads: they must agree (a file that changed
    between two of them is refused, uncharged)."""
    by_file: dict[str, str] = {}
    for (f, _), ident in zip(pieces, identities):
        if by_file.setdefault(f, ident) != ident:
            raise error("E0502", f"data file '{f}' for table '{table}' changed while it was being read; "
                                 "nothing was charged, run again")
    return by_file


def _combined(digests: list[str]) -> str:
    """A dataset's identity: a single file's is the pandas engine's (the SHA-256 of its bytes); a
    set of files is the SHA-256 of their digests in path order."""
    if len(digests) == 1:
        return digests[0]
    h = hashlib.sha256(b"fuzzpy-files\0")
    for d in digests:
        h.update(d.encode("ascii") + b"\n")
    return "sha256:" + h.hexdigest()


def _from_parts(parts: list[Any], meta: pd.DataFrame) -> Any:
    import dask.dataframe as dd

    return dd.from_delayed(parts, meta=meta, verify_meta=False)


def _from_map(fn: Callable[..., Any], pieces: list[Any], meta: pd.DataFrame, **kw: Any) -> Any:
    import dask.dataframe as dd

    return dd.from_map(fn, pieces, meta=meta, enforce_metadata=False, label="fuzzpy-conform", **kw)


def _is_cluster_error(exc: BaseException) -> bool:
    import asyncio
    import concurrent.futures

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return isinstance(exc, (KilledWorker, CommClosedError, asyncio.CancelledError,
                            concurrent.futures.CancelledError))


def _cluster_failure() -> DaskRunFailure:
    return DaskRunFailure("E2104", "the Dask cluster failed during the run (a worker died or the scheduler became "
                                   "unreachable)", None, KEPT)


# ---- what a program needs (checked before the charge) ---------------------------------------------

def refused_primitives() -> frozenset[str]:
    """Primitives that take a table and have no Dask evaluator: registered with
    dask=Refused(reason) (runtime/kernels/)."""
    return frozenset(n for n, p in all_primitives().items() if isinstance(p.dask, Refused))


# rule Engines
def unsupported_primitives(instance: I.Instance) -> list[str]:
    """Primitives the program's code calls that may take a table and have no Dask implementation
    (an over-approximation: the call may never receive a table; refusing it costs nothing)."""
    refused = refused_primitives()
    # rule Units: a map of a table with a unit is refused too (its rows would lose their unit)
    return sorted({n.name for n in I.reachable(instance) if isinstance(n, I.IPrim)
                   and (n.name in refused or (n.name == "map" and n.info.get("unit")))})


# ---- finding and checking the files ------------------------------------------------------------------

def data_files(spec: str, table: str) -> list[str]:
    """The files of a table: one file, every data file of a directory (not its subdirectories),
    or the files a glob pattern matches; sorted by path, all CSV or all Parquet."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(str(p) for p in path.iterdir() if p.is_file() and p.suffix.lower() in
                       CSV_SUFFIXES + PARQUET_SUFFIXES)
    elif any(ch in spec for ch in "*?["):
        files = sorted(f for f in glob.glob(spec) if Path(f).is_file())
    elif path.is_file():
        files = [str(path)]
    else:
        raise error("E0501", f"data path '{spec}' for table '{table}' does not exist")
    if not files:
        raise error("E2103", f"data path '{spec}' for table '{table}' holds no CSV or Parquet file")
    kinds = {"parquet" if f.lower().endswith(PARQUET_SUFFIXES) else
             "csv" if f.lower().endswith(CSV_SUFFIXES) else "other" for f in files}
    if "other" in kinds or len(kinds) > 1:
        raise error("E2103", f"the files of data path '{spec}' for table '{table}' must all be CSV "
                             f"({', '.join(CSV_SUFFIXES)}) or all Parquet ({', '.join(PARQUET_SUFFIXES)})")
    return files

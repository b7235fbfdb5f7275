"""Tables on a Dask cluster (`fuzzpy run --engine dask`, docs/scale.md): the same pipeline, with
the tables partitioned over the cluster's workers.

Only loading differs: the program is refused before anything is read if it calls a primitive
that takes a table and has no Dask implementation (E2101); then the cluster starts (or is
reached), every partition is read, hashed as it is read and conformed on the workers to check the
data (a bad file is refused uncharged, as on the pandas engine), and only then is the budget
charged, under the identity of the bytes conformed, and the program run.  The cluster is closed
with the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, error
from .local import EmptyAdvice, refuse_empty
from .public import load_public, match_public, parse_public
from .session import Loaded
from .tables import match_data, table_inputs


def require_dask() -> None:
    """E2106, saying what to install, unless the Dask engine's extra is installed: checked before
    anything is read or charged (a missing module would otherwise surface as an internal error)."""
    try:
        import dask.dataframe  # noqa: F401 - only whether they import
        import distributed  # noqa: F401
    except ImportError:
        raise FuzzError(Diagnostic("E2106", "the Dask engine is not installed (it needs dask and distributed)", None,
                                   ["install it with: pip install 'fuzzpy[dask]'", "nothing was read or charged"])) \
            from None


@dataclass
class DaskOptions:
    scheduler: Optional[str] = None  # an existing cluster's scheduler address; else a local cluster
    workers: Optional[int] = None
    threads: Optional[int] = None
    persist: bool = False  # keep the conformed partitions on the workers between passes


@dataclass
class DaskTables:
    data: list[str]
    header: bool = False
    dask: DaskOptions = None  # type: ignore[assignment]
    engine: Any = None
    public: list[str] = field(default_factory=list)  # --public NAME=PATH: loaded on the client (public data)
    empty: EmptyAdvice = EmptyAdvice()  # a table left without rows is refused unless allowed

    def match(self, report: Any) -> dict[str, Path]:
        spec = match_data(self.data, table_inputs(report))
        return {**spec, **match_public(parse_public(self.public), report)}

    def load(self, report: Any, spec: dict[str, Path], seeded: bool) -> Loaded:
        from ..runtime.columns import columns_read

        try:
            from ..runtime.engines import dask_engine as D
        except ImportError:
            raise error("E2106", "the Dask engine is not installed", None,
                        "install it with: pip install 'fuzzpy[dask]'") from None
        refused = D.unsupported_primitives(report.entry_instance)
        if refused:
            raise FuzzError([Diagnostic("E2101", f"primitive {name} cannot run on the Dask engine (it takes a table)",
                                        None, ["run the program with --engine pandas; nothing was read or charged"])
                             for name in refused])
        schemas = dict(table_inputs(report))
        # Public tables are small and not private: the client holds them, verified before the cluster starts.
        public = load_public(report, spec, columns_read(report.entry_instance), self.header)
        files = {name: D.data_files(str(path), name) for name, path in spec.items() if name in schemas}
        o = self.dask or DaskOptions()
        self.engine = D.DaskEngine.start(o.scheduler, o.workers, o.threads)
        self.engine.columns = columns_read(report.entry_instance)  # rule Columns kept
        loaded = Loaded(public, {})
        for name in files:
            # The identity is the hash of the bytes the checking pass conformed, and no later pass
            # computes from other bytes (docs/scale.md).
            loaded.tables[name], identity = self.engine.open_table(files[name], schemas[name], name,
                                                                   persist=o.persist, header=self.header)
            loaded.shown[name] = str(spec[name])
            if not seeded:
                loaded.accounts[name] = identity
        refuse_empty(loaded, report, self.empty, [name for name in spec if name in self.engine.empty])
        return loaded

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()

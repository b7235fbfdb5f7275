"""`fuzzpy run --engine dask`: the same pipeline as `fuzzpy run` (check -> budget -> load -> charge
-> run -> release), with the tables on a Dask cluster (docs/scale.md).

Only loading differs: the program is refused before anything is read if it calls a primitive
that takes a table and has no Dask implementation (E2101); then the cluster starts (or is
reached), every partition is read, hashed as it is read and conformed on the workers to check the
data (a bad file is refused uncharged, as on the pandas engine), and only then is the budget
charged, under the identity of the bytes conformed, and the program run.  The cluster is closed at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, error
from .run_command import _Run, table_inputs


@dataclass
class DaskOptions:
    scheduler: Optional[str] = None  # an existing cluster's scheduler address; else a local cluster
    workers: Optional[int] = None
    threads: Optional[int] = None
    persist: bool = False  # keep the conformed partitions on the workers between passes


@dataclass
class DaskRun(_Run):
    dask: DaskOptions = field(default_factory=DaskOptions)
    engine: Any = None

    def execute(self) -> int:
        try:
            return super().execute()
        finally:
            if self.engine is not None:
                self.engine.close()

    def load(self, spec: dict[str, Path]) -> tuple[dict[str, Any], dict[str, str]]:
        from ..runtime.columns import columns_read

        try:
            from ..runtime.engines import dask_engine as D
        except ImportError:
            raise error("E2106", "the Dask engine is not installed", None,
                        "install it with: pip install 'fuzzpy[dask]'") from None
        refused = D.unsupported_primitives(self.report.entry_instance)
        if refused:
            raise FuzzError([Diagnostic("E2101", f"primitive {name} cannot run on the Dask engine (it takes a table)",
                                        None, ["run the program with --engine pandas; nothing was read or charged"])
                             for name in refused])
        schemas = dict(table_inputs(self.report))
        self.data_paths = dict(spec)
        files = {name: D.data_files(str(path), name) for name, path in spec.items()}
        o = self.dask
        self.engine = D.DaskEngine.start(o.scheduler, o.workers, o.threads)
        self.engine.columns = columns_read(self.report.entry_instance)  # the columns the program reads
        tables, identities = {}, {}
        for name in spec:
            # The identity is the hash of the bytes the checking pass conformed, and no later pass
            # computes from other bytes (docs/scale.md).
            tables[name], ident = self.engine.open_table(files[name], schemas[name], name, persist=o.persist,
                                                         header=self.opts.header)
            if self.opts.seed is None:
                identities[name] = ident
        return tables, identities

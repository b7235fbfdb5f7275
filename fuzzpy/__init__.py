"""fuzzpy: a statically checked sensitivity language for differentially private data analysis.

The Python API (docs/python.md)::

    import fuzzpy
    report = fuzzpy.check("examples/quickstart.fz")           # or the program's source text
    result = fuzzpy.run("examples/quickstart.fz", df, budget=0.5, ledger="ledger.sqlite")
    result.releases, result.value, result.to_frame()

In IPython or Jupyter, `%load_ext fuzzpy` adds the cell magic `%%fuzzpy --data db=df --budget 0.5`.
Names are imported on first use, so `fuzzpy check` on the command line starts fast.
"""

from __future__ import annotations

from typing import Any

_API = ("check", "run", "Report", "Result", "Released", "Accuracy", "Estimate", "Spending", "Mechanism", "FuzzpyError")
__all__ = [*_API, "load_ipython_extension", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one place (version.py), read only when asked for
        from .version import __version__

        return __version__
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'fuzzpy' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext fuzzpy`: registers the `%%fuzzpy` cell magic."""
    from .interfaces.notebook import register_magic

    register_magic(ipython)

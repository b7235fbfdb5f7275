"""Every primitive's evaluators, registered on its declaration (docs/runtime.md, "Where a
primitive is evaluated").

One module per family of primitives, named as the module that declares them in
fuzzpy/primitives/ (`sum` is declared in primitives/bags.py and evaluated in kernels/bags.py).
Each registers, with `primitives.registry.kernel`, every evaluator of each of its primitives
side by side.  Importing this package registers them all and checks that no declared
primitive was left without its kernels.
"""

from __future__ import annotations

from ...primitives.registry import without_kernels
from . import (  # noqa: F401
    arith,
    bags,
    binning,
    estimates,
    joins,
    library,
    linalg,
    lists,
    mechanisms,
    ordered,
    partitions,
    sampling,
    trees,
    units,
    vectors,
)

_missing = without_kernels()
if _missing:
    raise ImportError(f"declared primitives without kernels: {', '.join(_missing)}")

"""The fixed-point grid every noisy release uses, as the samplers and the reports read it.

It is decided from public numbers only and defined with the mechanisms' declarations
(fuzzpy/primitives/grid.py): the sparse vector's typing rule charges for the rounding onto it,
and the samplers round onto it (runtime/noise.py).  One definition for both.
"""

from __future__ import annotations

from ..primitives.grid import (
                               GRID_BITS,
                               MAX_NOISE_SCALE,
                               MAX_NOISE_SCALE_TEXT,
                               ceil_log2,
                               ceil_sqrt,
                               gaussian_grid_bits,
                               gaussian_shift_bound,
                               grid_bits,
)

__all__ = ["GRID_BITS", "MAX_NOISE_SCALE", "MAX_NOISE_SCALE_TEXT", "ceil_log2", "ceil_sqrt", "gaussian_grid_bits",
           "gaussian_shift_bound", "grid_bits"]

"""The type system the checker, the primitives and the runtime share: types and their metrics
(`types.py`), exact distance expressions (`sens.py`), the rho shadow channels and the pure
inventory (`quadratic.py`), the failure effect (`effects.py`), and the checked program the runtime
runs (`ir.py`)."""

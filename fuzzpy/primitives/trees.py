"""Additional primitives used by the standard library and examples (see docs/primitives.md)."""

from __future__ import annotations

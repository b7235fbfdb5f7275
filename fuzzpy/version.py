"""fuzzpy's version (one place: the package, the check cache's key and `fuzzpy --version` read it)."""

__version__ = "0.1.0"

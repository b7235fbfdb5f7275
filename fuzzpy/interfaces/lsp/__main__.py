"""`python -m fuzzpy.interfaces.lsp`: serve on stdin/stdout, like `fuzzpy lsp`."""

from . import main

if __name__ == "__main__":  # pragma: no cover
    main()

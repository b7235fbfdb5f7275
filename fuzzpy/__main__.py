"""`python -m fuzzpy ...`: the same command line as the `fuzzpy` script."""

from fuzzpy.interfaces.cli import main

if __name__ == "__main__":
    main()

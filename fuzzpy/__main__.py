"""`python -m fuzzpy ...`: the same command line as the `fuzzpy` script."""

from fuzzpy.interfaces.checkcmd import main  # a plain `check` skips typer (checkcmd)

if __name__ == "__main__":
    main()

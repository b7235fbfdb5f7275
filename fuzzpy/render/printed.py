"""What a command prints, before it is printed: lines for standard output and standard error,
in the order they were written.  The command line writes them to the terminal; the curator
service returns them in its answer, so both show exactly the same bytes."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass
class Printed:
    lines: list[tuple[bool, str]] = field(default_factory=list)  # (to stderr?, text), in order
    exit_code: int = 0

    def out(self, text: str) -> None:
        self.lines.append((False, text))

    def err(self, text: str) -> None:
        self.lines.append((True, text))

    def extend(self, other: "Printed") -> None:
        self.lines.extend(other.lines)

    def stdout(self) -> str:
        return "".join(text + "\n" for to_err, text in self.lines if not to_err)

    def stderr(self) -> str:
        return "".join(text + "\n" for to_err, text in self.lines if to_err)

    def write(self) -> None:
        """To the process's streams, each line flushed so that the two interleave in order."""
        for to_err, text in self.lines:
            stream = sys.stderr if to_err else sys.stdout
            if stream is not None:
                stream.write(text + "\n")
                stream.flush()

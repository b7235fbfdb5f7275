"""The audit log: one JSON line per request, for the curator.

It records who asked what and what it cost, never a private value: no released value, no
program output, no data; the program is recorded by its sha256, not its text."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from typing import Any, Optional, TextIO


class AuditLog:
    def __init__(self, where: str = "-") -> None:
        self._lock = threading.Lock()
        self._file: Optional[TextIO] = None
        if where != "-":
            self._file = open(where, "a", encoding="utf-8", buffering=1)

    def write(self, **event: Any) -> None:
        event = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **event}
        line = json.dumps(event, sort_keys=False, default=str) + "\n"
        with self._lock:
            target = self._file if self._file is not None else sys.__stderr__
            target.write(line)
            target.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

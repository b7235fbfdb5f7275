"""Group key codes kept across runs by whoever holds a table in memory (fuzzpy serve's cache).

Within one run, `groupby` remembers the part number of every row of a table for each key
function that reads only public constants (primitives/partitions.py, `remembered_key_codes`): a tree
learner groups the same table by the same attributes at every node.  A run that starts from a
freshly loaded table must compute those codes again.  A holder that runs many programs over one
table it keeps in memory, and never changes, can hand the runtime a `KeptCodes` with the table:
codes computed by one run are then read by the next (docs/runtime.md, "Codes kept across runs").

The store is the holder's promise that every frame passed with it holds the same rows, in the
same order, with the same values (fuzzpy serve keeps one per cached table: the table is the
registered file's bytes, checked before each run, and no run changes it).  A key's codes are a
function of those rows alone, so a kept array is the array the run would compute: released
values and the privacy accounting are unchanged.  Arrays are read-only: runs on several threads
share them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Optional

KEPT_BYTES = 256 << 20  # code arrays kept per table, least recently used dropped first


class KeptCodes:
    """Key codes of one table, by (key identity, groupby decisions), least recently used first."""

    def __init__(self, max_bytes: int = KEPT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._codes: "OrderedDict[Hashable, Any]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Optional[Any]:
        with self._lock:
            codes = self._codes.get(key)
            if codes is not None:
                self._codes.move_to_end(key)
            return codes

    def put(self, key: Hashable, codes: Any) -> None:
        """Keep `codes` (a numpy array, made read-only) unless it alone is over the limit."""
        if codes.nbytes > self.max_bytes:
            return
        codes.flags.writeable = False
        with self._lock:
            old = self._codes.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._codes[key] = codes
            self._bytes += codes.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._codes.popitem(last=False)
                self._bytes -= dropped.nbytes

    def __len__(self) -> int:
        return len(self._codes)

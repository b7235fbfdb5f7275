"""Known digests: a local run reads only the columns it needs of a Parquet file, and hashes it
only the first time.

A dataset's identity is the SHA-256 of its file's bytes (docs/ledger.md), and it must be the
identity of the bytes parsed.  A snapshot of the whole file in memory guarantees that, at the
cost of reading (and holding) every byte, even when the program reads one column.  The file's
*state* can guarantee it too: what the kernel records of the open file (device, inode, size,
modification time and change time), with its absolute path.  The argument (docs/data.md,
"Known digests"):

- every change of a file's bytes sets its ctime to the current time, and no call sets it to a
  chosen value (touch, cp -p and rsync set the mtime only), so a file whose bytes changed has
  another state;
- a file is parsed from itself only if its state was SETTLE_NS old when the read began (a write
  in the same tick of a coarse clock could otherwise leave the ctime as it was) and is the same
  once the parse and the hash have ended; otherwise it is parsed from a snapshot, as always;
- only files owned by the current user and writable by no one else qualify: another user, who
  cannot write the file, cannot change its bytes under a state;
- the identity of a state is recorded in the user's private cache folder (fuzzpy/cachedir.py),
  authenticated with an HMAC under the per-user key, checked before an entry is believed: an
  entry written by anyone without the key, or damaged, is a miss, and a miss hashes the file.

Only runs on the user's own data use it (pipeline/local.py); the curator service hashes every
file it registers or loads.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, NamedTuple, Optional

from ..cachedir import prune_oldest, write_entry

FORMAT = 1
MAGIC = b"FZDIGST1"
SETTLE_NS = 2_000_000_000  # a file changed within the last 2 s is parsed from a snapshot (coarse clocks)
MAX_ENTRIES = 1000  # beyond this, the least recently written entries are removed
_IDENTITY = re.compile(rb"sha256:[0-9a-f]{64}")


class FileState(NamedTuple):
    """What the kernel records of an open file, which changes whenever its bytes do."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


# rule Known digests: only a regular file that the user alone can write
def file_state(f: BinaryIO, path: Path) -> Optional[FileState]:
    """The open file's state, or None when its digest must not be cached: not a regular file, or
    one another user may write (or a system without owners)."""
    if not hasattr(os, "getuid"):
        return None
    try:
        st = os.fstat(f.fileno())
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return FileState(os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# rule Known digests: a file changed within SETTLE_NS is not trusted to its state
def settled(state: FileState, read_at_ns: int) -> bool:
    """Whether the file had not changed for SETTLE_NS when its read began at `read_at_ns`
    (time.time_ns(), taken before the state): on a filesystem with a coarse clock, a write in the
    same tick as the last one would leave the state as it was."""
    return max(state.ctime_ns, state.mtime_ns) <= read_at_ns - SETTLE_NS


class DigestCache:
    """Identities of file states, in a private folder, authenticated with the user's key."""

    def __init__(self, folder: Path, key: bytes) -> None:
        self._folder, self._key = folder, key

    @staticmethod
    def _material(state: FileState) -> bytes:
        return repr((FORMAT, *state)).encode("utf-8", "surrogateescape")

    def _entry(self, material: bytes) -> Path:
        return self._folder / (hashlib.sha256(material).hexdigest() + ".digest")

    # rule Known digests: an entry is believed only with the user's HMAC and for exactly this state
    def lookup(self, state: FileState) -> Optional[str]:
        """The identity recorded for exactly this state, or None (a miss)."""
        material = self._material(state)
        try:
            blob = self._entry(material).read_bytes()
        except OSError:
            return None
        tag, body = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
        if not blob.startswith(MAGIC) or not hmac.compare_digest(tag, self._tag(body)):
            return None  # damaged, or not written with this user's key
        recorded, _, identity = body.rpartition(b"\n")
        if recorded != material or not _IDENTITY.fullmatch(identity):
            return None
        return identity.decode("ascii")

    # rule Known digests: recorded only if the state held through the hash
    def record(self, before: FileState, f: BinaryIO, identity: str) -> bool:
        """Record `identity`, hashed from `f` while it was in state `before` (taken, `settled`,
        before the read), if it is still in that state."""
        if file_state(f, Path(before.path)) != before:
            return False  # changed while it was read: its bytes may be of no single state
        if not _IDENTITY.fullmatch(identity.encode("ascii")):
            return False
        body = self._material(before) + b"\n" + identity.encode("ascii")
        if not write_entry(self._entry(self._material(before)), MAGIC + self._tag(body) + body):
            return False
        prune_oldest(self._folder, "*.digest", MAX_ENTRIES)
        return True

    def _tag(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()


# rule Known digests: only the user's private folder and key
def open_digest_cache() -> Optional[DigestCache]:
    """The user's digest cache, or None when there is no private cache folder or key
    ($FUZZPY_NO_CACHE, a shared or unwritable folder)."""
    from ..cachedir import private_folder, user_key

    folder = private_folder("digests")
    key = user_key(folder) if folder is not None else None
    return None if folder is None or key is None else DigestCache(folder, key)

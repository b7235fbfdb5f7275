"""The user's private cache folder, shared by the check cache and the parser's tables.

Whatever is read back from it is trusted only as far as the folder is private: it must belong to
the current user and be writable by no one else (POSIX), or it is not used at all (None).  A
cache folder is never required: every caller works, more slowly, without one.

$FUZZPY_CACHE_DIR names another folder; $FUZZPY_NO_CACHE=1 turns every on-disk cache off.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

ENV_DIR = "FUZZPY_CACHE_DIR"
ENV_OFF = "FUZZPY_NO_CACHE"


def cache_root() -> Optional[Path]:
    """$FUZZPY_CACHE_DIR, else the user's cache folder (XDG on Linux); None when
    $FUZZPY_NO_CACHE is set."""
    if os.environ.get(ENV_OFF, "").strip() not in ("", "0"):
        return None
    override = os.environ.get(ENV_DIR, "").strip()
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("fuzzpy", appauthor=False))


def is_private(path: Path) -> bool:
    """Owned by this user and writable by no one else (POSIX); elsewhere the user's profile."""
    if not hasattr(os, "getuid"):
        return path.is_dir()
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def private_folder(name: str) -> Optional[Path]:
    """The sub-folder `name` of the cache root, created (mode 0700) if needed, or None when
    there is no usable private cache folder (off, not writable, or shared)."""
    root = cache_root()
    if root is None:
        return None
    folder = root / name
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not (is_private(root) and is_private(folder)):
            return None
    except OSError:
        return None
    return folder


KEY_BYTES = 32


# rule Reused reports
def user_key(folder: Path) -> Optional[bytes]:
    """The per-user key that authenticates a private folder's entries: created once with mode
    0600, refused when others could read it (then the caller does not use the folder)."""
    path = folder / "key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return None
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))
    try:
        st = path.stat()
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            return None
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


# rule Reused reports
# rule Known digests
def write_entry(target: Path, blob: bytes) -> bool:
    """Write an entry whole under a name of this writer's own, then rename it into place: a
    concurrent reader sees the old entry, the new one or none, never a part.  False if it could
    not be written (never a failure of the caller)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(blob)
        os.replace(tmp, target)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return False
    return True


# rule Reused reports
# rule Known digests
def prune_oldest(folder: Path, pattern: str, limit: int) -> None:
    """Keep a cache folder bounded: past `limit` entries matching `pattern`, remove the least
    recently written down to 3/4 of it."""
    try:
        entries = list(folder.glob(pattern))
        if len(entries) <= limit:
            return
        entries.sort(key=lambda p: p.stat().st_mtime_ns)
        for old in entries[: len(entries) - limit * 3 // 4]:
            old.unlink(missing_ok=True)
    except OSError:
        pass

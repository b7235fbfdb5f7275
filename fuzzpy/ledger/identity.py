"""What the ledger books runs under: the identity of a dataset (the hash of its file's bytes) and
of a program (the hash of its text and public parameters)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..diagnostics import error

_CHUNK = 1 << 20
_SHORT_HEX = 12


def dataset_identity(path: Path) -> str:
    """"sha256:<hex>" of the file's bytes: a renamed copy is the same dataset, an edit is not.

    Only a regular file is read (checked before it is opened): a FIFO or a device would make
    the hash wait forever."""
    from ..runtime.files import NotARegularFile, identity, open_regular

    digest = hashlib.sha256()
    try:
        with open_regular(Path(path)) as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        raise error("E0501", f"data file not found: {path}") from None
    except NotARegularFile:
        raise error("E0502", f"data file {path} is a folder, a device or a pipe, not a regular file") from None
    except OSError as exc:
        raise error("E0502", f"cannot read data file {path} ({why(exc)})") from None
    return identity(digest)


def program_hash(source: str, params: dict[str, str] | None = None) -> str:
    """"sha256:<hex>" of the program text; with public params, of the text plus the sorted params.

    Without params this equals `sha256sum` of the UTF-8 source, so a curator can match a file.
    """
    digest = hashlib.sha256(source.encode("utf-8"))
    if params:
        canonical = json.dumps(params, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        digest.update(b"\n\0fuzzpy-params\0" + canonical.encode("utf-8"))
    return "sha256:" + digest.hexdigest()


def short_id(identity: str) -> str:
    """"sha256:3f2a9c81d04e" — enough to tell datasets apart on screen, never the whole hash."""
    algo, sep, hexpart = identity.partition(":")
    if not sep:
        return identity[:_SHORT_HEX]
    return f"{algo}:{hexpart[:_SHORT_HEX]}"



def why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__

"""The one atomic writer: every result, config, pid and state file goes through it.

A temp file beside the target, then a rename: a reader sees the old file or the new one, never half
of one. On any failure (a full disk, a signal's exception) the temp file is removed and the error
names the target path in one line, so no `.name.tmpPID` is left behind.
"""
from __future__ import annotations

import os
from pathlib import Path


class WriteError(OSError):
    """A write that did not happen; str() is one line naming the path and the reason."""

    def __str__(self) -> str:  # without OSError's "[Errno 28] " prefix
        return self.strerror


def write_atomic(path, text: str | bytes, mode: int = 0o644) -> None:
    """Write text (or bytes) to path. The temp file is created with `mode`, so a secret (.env) is
    never readable by others, not even for a moment."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        os.chmod(tmp, mode)  # exactly `mode`, whatever the umask
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OSError):
            raise WriteError(e.errno, f"cannot write {path}: {e.strerror or e}") from None
        raise

"""Reading a file that may be hostile: a regular file only, and only so much of it.

A manifest is read at every import, by the loader and by the doctor, from a folder
anybody may have written to: replaced by a FIFO it would hang the import forever, linked
to ``/dev/zero`` it would fill the memory. So a file is opened without blocking, checked
to be a regular file on the opened descriptor (a symlink to a device or a FIFO is
refused, not followed into), and read up to a limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["UnsafeFileError", "read_regular_file"]


class UnsafeFileError(OSError):
    """The file is not a regular file, or is larger than the reader allows."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, at most ``limit``; ``UnsafeFileError`` for anything but a
    regular file (FIFO, device, socket, folder) or a larger file, OSError as usual."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a folder"
                if stat.S_ISDIR(mode)
                else "not a regular file"
            )
            raise UnsafeFileError(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnsafeFileError(
                errno.EFBIG, f"is larger than {limit} bytes, more than it can be", str(path)
            )
        return b"".join(chunks)
    finally:
        os.close(fd)

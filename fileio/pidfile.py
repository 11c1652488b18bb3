"""The one format of pid files and the one check of who they name, for every reader.

A pid file holds the pid and the process's start time (field 22 of /proc/<pid>/stat, clock ticks
since boot): after a crash and a reboot or pid reuse, the same pid is another process. The local
runtime (stack.procs) signals and waits on what `read` returns; the exporter attributes memory to
a version by it.
"""
from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def start_time(pid: int, proc: Path = PROC) -> int | None:
    """When pid started (clock ticks since boot), None if there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the command name may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def line(pid: int, proc: Path = PROC) -> str:
    """What a pid file holds for the running process pid."""
    return f"{pid} {start_time(pid, proc)}\n"


def read(pid_file: Path, proc: Path = PROC) -> int | None:
    """The pid of pid_file if that process is still the one that wrote it, else None."""
    try:
        pid, started = (int(x) for x in pid_file.read_text().split()[:2])
    except (OSError, ValueError):
        return None
    return pid if start_time(pid, proc) == started else None


def stale(pid_file: Path, proc: Path = PROC) -> bool:
    """A pid file whose process is gone or is not the one that wrote it any more (pid reused)."""
    return pid_file.exists() and read(pid_file, proc) is None

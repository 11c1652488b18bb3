"""Processes the local runtime starts: detached, with pid and log files, stopped exactly.

A pid file holds the pid and the process's start time (see `pidfile`): after a crash and a
reboot or pid reuse, the same pid is another process, and nothing here will signal it. `state_lock` serialises `up` and `down` on one state directory.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

from fileio import pidfile
from fileio.atomic import write_atomic
from core.errors import UsageError


# The pid-file format and its identity check live in `pidfile`, shared with the exporter.
start_time, read_pid, stale = pidfile.start_time, pidfile.read, pidfile.stale


@contextlib.contextmanager
def state_lock(state_dir: Path, what: str, timeout_s: float = 60.0):
    """Hold the state directory's lock: two `up`s (or an `up` and a `down`) never interleave."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / ".lock", "a+") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise UsageError(f"another `make up`/`down` holds {state_dir / '.lock'} for over "
                                       f"{timeout_s:.0f}s; {what} waits for it: let it finish") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Busy(UsageError):
    """Another measurement holds this clone's servers (exit 2: nothing was started)."""
    exit_code = 2


@contextlib.contextmanager
def measurement_lock(state_dir: Path, what: str):
    """One measurement at a time on one state directory's servers. A second compare cold-started the first's
    servers and finished exit 0 with a ceiling taken under the first's load; now it is refused at once, naming
    the first. flock: released by the kernel when the holder dies, so a killed compare leaves no stale lock."""
    created = not state_dir.exists()  # a command refused as bad input leaves no state directory behind
    state_dir.mkdir(parents=True, exist_ok=True)
    f = open(state_dir / ".measuring", "a+")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = " ".join(f.read().split()) or "another process"
            raise Busy(f"{holder} is measuring on this clone's servers ({state_dir}); {what} would disturb it "
                       "and be disturbed: wait for it to end, or stop it (Ctrl-C in its terminal)") from None
        f.seek(0)
        f.truncate()
        f.write(f"{what} (pid {os.getpid()}, since {time.strftime('%H:%M:%S')})\n")
        f.flush()
        yield
    finally:
        f.close()  # closing releases the lock
        if created:
            try:
                (state_dir / ".measuring").unlink()
                state_dir.rmdir()  # only where nothing else was written
            except OSError:
                pass


def alive(pid: int | None, must_contain: str = "") -> bool:
    """True if pid runs (and, when asked, its command line contains must_contain)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":  # a zombie has exited
        return False
    return must_contain in cmdline


def start(cmd: list, pid_file: Path, log_file: Path, env: dict | None = None, cwd: Path | None = None,
          preexec_fn=None) -> int:
    """Start cmd detached (own session, so `make` ending doesn't kill it); record its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=cwd, preexec_fn=preexec_fn)
    write_atomic(pid_file, pidfile.line(proc.pid))
    return proc.pid


def stop(pid_file: Path, must_contain: str = "", timeout_s: float = 10.0, log=print) -> bool:
    """SIGTERM, wait, then SIGKILL the process group of pid_file; True if one was running. A pid
    that is not the process we started (gone, or reused by another) is never signalled."""
    if stale(pid_file):
        log(f"{pid_file}: its process is gone or is not the one started here (pid reused): not signalling it; "
            "removed the stale pid file")
        pid_file.unlink(missing_ok=True)
        return False
    pid = read_pid(pid_file)
    was_alive = alive(pid, must_contain)
    if was_alive:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout_s
        while alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap(pid)
    pid_file.unlink(missing_ok=True)
    return was_alive


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def peak_rss(pid: int | None) -> int | None:
    """A process' highest resident memory so far (the kernel's VmHWM), bytes; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError, TypeError):
        return None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(log_file: Path, lines: int = 3) -> str:
    try:
        text = log_file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    useful = [ln for ln in text if ln.strip() and not ln.startswith(("W0000", "I0000"))]
    return " | ".join(useful[-lines:])

"""Per-version virtualenvs for the local runtime, created with uv and reused by pins.

A venv lives in $TFSB_HOME/venvs/tf<version>-py<python>-<hash of its pins>, so a
changed pin makes a new venv and an unchanged one is reused (`make test` is fast
the second time). A venv is complete only once its `.complete` marker exists:
an interrupted install is redone, never half-used.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from core.registry import Registry, Version
from core.errors import BenchError
from core import settings


class VenvError(BenchError, RuntimeError):
    """Creating a venv failed; the message says which command and why."""


def home() -> Path:
    return settings.cache_home()


def _pins(version: Version, registry: Registry, gpu: bool) -> list[str]:
    return [version.python, *version.requirements(registry.server_pip, gpu), "nodeps:" + version.serving_api]


def venv_path(version: Version, registry: Registry, gpu: bool = False) -> Path:
    digest = hashlib.sha256("\n".join(_pins(version, registry, gpu)).encode()).hexdigest()[:10]
    kind = "gpu" if gpu else "cpu"
    return home() / "venvs" / f"tf{version.key}-{kind}-py{version.python}-{digest}"


def find_python(minor: str) -> str:
    """An interpreter for Python `minor` ("3.9"): pyenv's, then uv's, then uv installs one."""
    roots = [str(settings.pyenv_root())]
    for root in roots:
        hits = sorted(glob.glob(f"{root}/versions/{minor}.*/bin/python{minor}"))
        if hits:
            return hits[-1]
    uv = uv_binary()
    found = subprocess.run([uv, "python", "find", "--system", minor], capture_output=True, text=True)
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.strip()
    run_or_raise([uv, "python", "install", minor], f"install Python {minor}")
    return subprocess.run([uv, "python", "find", minor], capture_output=True, text=True, check=True).stdout.strip()


def uv_binary() -> str:
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(uv).exists():
        raise VenvError("uv not found on PATH; install it with `pip install uv` (or run `make setup`)")
    return uv


def run_or_raise(cmd: list[str], what: str, error: type = VenvError, **kw) -> None:
    """Run cmd; on failure raise `error` with one line: what failed and the last lines it printed."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise error(f"{what} failed: {' | '.join(tail)}")



def ensure_venv(version: Version, registry: Registry, gpu: bool = False, log=print) -> Path:
    """Return the venv's path, creating it first when missing or incomplete."""
    path = venv_path(version, registry, gpu)
    if (path / ".complete").exists():
        if not (path / ".bytecode").exists():  # made before venvs were compiled: once, then never again
            compile_bytecode(path, log)
        return path
    if path.exists():
        shutil.rmtree(path)
    log(f"creating venv for TF Serving {version.name} (TensorFlow {version.tensorflow}, Python {version.python}) at {path}")
    uv = uv_binary()
    path.parent.mkdir(parents=True, exist_ok=True)
    run_or_raise([uv, "venv", "-q", "-p", find_python(version.python), str(path)], f"uv venv for {version.name}")
    env = dict(os.environ, VIRTUAL_ENV=str(path))
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    run_or_raise([uv, "pip", "install", "-q", *version.requirements(registry.server_pip, gpu)],
                 f"installing TF {version.tensorflow}", env=env)
    # tensorflow-serving-api depends on the `tensorflow` distribution, which would
    # install a second TF over tensorflow-cpu's files: take the stubs alone.
    run_or_raise([uv, "pip", "install", "-q", "--no-deps", version.serving_api], "installing tensorflow-serving-api",
                 env=env)
    (path / ".complete").write_text("\n".join(_pins(version, registry, gpu)) + "\n")
    compile_bytecode(path, log)
    return path


def compile_bytecode(path: Path, log=print) -> None:
    """Compile the venv's modules once. Where PYTHONDONTWRITEBYTECODE is set (this machine's default)
    Python never caches bytecode, so every process that imports TensorFlow (each server start, each
    ceiling process) compiled its ~1,700 modules again: `import tensorflow` took 6.0 s instead of 2.2 s
    on TF 2.9 here. A file that does not compile (a test of another Python) is left as it is."""
    log(f"compiling the bytecode of {path.name} (once)")
    compile_dirs(venv_python(path), list((path / "lib").glob("python3.*/site-packages")))
    (path / ".bytecode").write_text("")


def compile_dirs(python: str, dirs: list) -> None:
    """compileall with `python` (whose minor version reads the .pyc files) over dirs, all cores."""
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", *map(str, dirs)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=1800)


def venv_python(path: Path) -> str:
    return str(path / "bin" / "python")

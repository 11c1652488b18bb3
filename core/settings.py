"""The tool's settings that come from the environment (the Makefile's variables and TFSB_*), each with one spelling,
one default and one truth test. Below the entry points (whose argparse defaults read the Makefile's variables for
their flags), this is the one module that reads os.environ; modules that build a child's environment copy it.

Read at each call, not cached: a test's monkeypatch, and the suite's conftest, change them within one process.
"""
from __future__ import annotations

import os
from pathlib import Path

from core.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VERSIONS = "2.9 2.21"  # what compare, demo and k8s take when VERSIONS is not given
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _get(name: str) -> str:
    return os.environ.get(name, "").strip()


def flag(name: str, default: bool) -> bool:
    """The one truth test of every on/off variable (GPU, ISOLATE): 1/true/yes/on, 0/false/no/off, unset or empty
    is the default; anything else is refused in one line."""
    raw = _get(name).lower()
    if not raw:
        return default
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise UsageError(f"{name} must be 1 or 0, got {os.environ[name]!r}")


def gpu() -> bool:
    return flag("GPU", False)


def isolate() -> bool:
    return flag("ISOLATE", True)


def state_root() -> Path:
    """The stack's state (pid files, logs, TSDB, the measurement lock): TFSB_STATE, else .state/ in the checkout."""
    return Path(_get("TFSB_STATE") or ROOT / ".state")


def results_root() -> Path:
    return Path(_get("TFSB_RESULTS") or ROOT / "results")


def baselines_root() -> Path:
    return Path(_get("TFSB_BASELINES") or ROOT / "baselines")


def cache_home() -> Path:
    """Venvs and image rootfs tarballs, shared by every clone of this user: TFSB_HOME."""
    return Path(_get("TFSB_HOME") or Path.home() / ".cache" / "tfserving-bench")


def port_offset() -> int:
    raw = _get("TFSB_PORT_OFFSET") or "0"
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"TFSB_PORT_OFFSET must be an integer, got {raw!r}") from None


def versions_file() -> str:
    """TFSB_VERSIONS_FILE: another registry than stack/versions.yaml ("" for that one)."""
    return _get("TFSB_VERSIONS_FILE")


def compose_project() -> str:
    return _get("COMPOSE_PROJECT_NAME") or "tfsb"


def image_override(variable: str) -> str:
    """A version's image as compose resolves it: its TFSERVING_IMAGE_<v> variable ("" for the registry's tag)."""
    return _get(variable)


def nvml_module() -> str:
    """The NVML binding the exporter imports (tests inject a fake at the hardware boundary)."""
    return _get("TFSB_NVML_MODULE") or "pynvml"


def extra_pythonpath() -> str:
    return _get("TFSB_PYTHONPATH")


def loadgen_targets_dir() -> str:
    return _get("TFSB_LOADGEN_TARGETS")


def debian_mirror() -> str:
    return _get("DEBIAN_MIRROR") or "http://deb.debian.org/debian"


def pyenv_root() -> Path:
    return Path(_get("PYENV_ROOT") or Path.home() / ".pyenv")


def inherited_tf_settings() -> dict:
    """TensorFlow's own variables this process passes to the servers it starts (recorded with a run)."""
    return {k: os.environ[k] for k in ("TF_ENABLE_ONEDNN_OPTS",) if k in os.environ}

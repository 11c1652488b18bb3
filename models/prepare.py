"""Where each version's model comes from: the example export, or a user's SavedModel."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from core.registry import Registry, Version
from core.venvs import ensure_venv, venv_python
from core.errors import UsageError

from core.settings import ROOT
BUILD = ROOT / "models" / "build"
MODEL_NAME = "my_model"


class ModelError(UsageError):
    """A model path that cannot be served, or an export that failed."""


def example_base_path(version: Version, extra_layers: int = 0) -> Path:
    suffix = f"-x{extra_layers}" if extra_layers else ""
    return BUILD / f"tf{version.key}{suffix}" / MODEL_NAME


def ensure_example_model(version: Version, registry: Registry, extra_layers: int = 0, log=print) -> Path:
    """Export the example model with the version's own TensorFlow, once."""
    base = example_base_path(version, extra_layers)
    if (base / "1" / "saved_model.pb").exists():
        return base
    py = venv_python(ensure_venv(version, registry, log=log))
    log(f"exporting the example model with TensorFlow {version.tensorflow} to {base}")
    proc = subprocess.run([py, "-m", "models.export", "--out", str(base), "--model-version", "1",
                           "--model-name", MODEL_NAME, "--extra-layers", str(extra_layers)],
                          cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise ModelError(f"exporting the example model with TF {version.tensorflow} failed: {tail[0]}")
    return base


def ensure_test_models(version: Version, registry: Registry, log=print) -> Path:
    """TF Serving's kind of test models (models/testdata.py), built once with the version's own TF:
    <dir>/half_plus_two/00000123, <dir>/half_plus_n/{1,2} and <dir>/half_plus_two_tf2/00000123."""
    from models.testdata import MODELS, REVISION

    out = BUILD / f"tf{version.key}" / "testdata"
    marker = out / ".complete"
    if marker.exists() and marker.read_text().split() == [*MODELS, REVISION]:
        return out
    py = venv_python(ensure_venv(version, registry, log=log))
    log(f"building the test models with TensorFlow {version.tensorflow} into {out}")
    proc = subprocess.run([py, "-m", "models.testdata", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise ModelError(f"building the test models with TF {version.tensorflow} failed: {tail[0]}")
    return out


def check_base_path(path: str) -> Path:
    """A user's model base path: it must hold <n>/saved_model.pb; say what is wrong otherwise."""
    base = Path(path).resolve()
    if not base.is_dir():
        raise ModelError(f"model path {path} is not a directory")
    if (base / "saved_model.pb").exists() or (base / "saved_model.pbtxt").exists():
        raise ModelError(f"{path} is a SavedModel itself; TF Serving needs it inside a numbered "
                         f"version directory: move it to {path}/1/ and pass {path}")
    versions = [d for d in base.iterdir() if re.fullmatch(r"[0-9]+", d.name) and
                ((d / "saved_model.pb").exists() or (d / "saved_model.pbtxt").exists())]
    if not versions:
        raise ModelError(f"no SavedModel under {path}: expected {path}/<version>/saved_model.pb")
    return base

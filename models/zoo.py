"""The model zoo: models where versions differ, built offline with seeded weights, beside the example MLP.

    MODEL=recommender make compare VERSIONS="2.9 2.21"     # a zoo name anywhere MODEL= is read
    python -m models zoo recommender --versions "2.9 2.21"  # build it (once) and print its base path

Each is exported once, by the oldest TensorFlow release among the versions compared (a SavedModel loads in later
releases, never reliably in earlier ones), and served unchanged by every version, exactly as a user's own model
is; <base>/../EXPORTED_BY names that release for the report. MODEL=/path/to/base stays the way to bring one's own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from models.prepare import BUILD, ROOT, ModelError
from core.venvs import ensure_venv, venv_python

# name -> (module that exports it inside a version's venv, what it is)
ZOO = {"recommender": ("models.recommender", "TFX-style recommender: tf.Example in (ParseExampleV2), a vocabulary "
                                             "asset, embeddings; predict, classify and regress signatures"),
       "image": ("models.image", "keras.applications ResNet-50 on 64x64 RGB: float images (serving_default) and "
                                 "JPEG bytes decoded in the graph (serving_bytes)"),
       "text": ("models.text", "BERT-style encoder: two transformer blocks on int32 token ids [batch, 32]"),
       "growing": ("models.growing", "the example model's input; each call inserts 64 new keys into a hash table: "
                                     "memory that grows with use, the positive control of the growth verdict")}


def _release(v) -> tuple:
    return tuple(int(x) for x in v.tensorflow.split("."))


def exporter_of(versions: list):
    """The version whose TensorFlow exports a zoo model for these versions: the oldest release."""
    return min(versions, key=_release)


def base_path(name: str, exporter) -> Path:
    return BUILD / "zoo" / f"{name}-tf{exporter.tensorflow}" / name


def ensure(name: str, registry, versions: list, log=print) -> Path:
    """Build zoo model `name` with the oldest release among versions, once; its model base path."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; the zoo has: {', '.join(sorted(ZOO))} (or give a path)")
    exporter = exporter_of(versions)
    base = base_path(name, exporter)
    if (base / "1" / "saved_model.pb").exists():
        return base
    py = venv_python(ensure_venv(exporter, registry, log=log))
    log(f"building zoo model {name} with TensorFlow {exporter.tensorflow} into {base}")
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base.parent))
    try:
        proc = subprocess.run([py, "-m", ZOO[name][0], "--out", str(tmp / name / "1")], cwd=ROOT, capture_output=True,
                              text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT)))
        if proc.returncode != 0:
            tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
            raise ModelError(f"building zoo model {name} with TF {exporter.tensorflow} failed: {tail[0]}")
        for root, dirs, _ in os.walk(tmp):  # readable by a server running as another user (containers)
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        (tmp / name / "EXPORTED_BY").write_text(f"{exporter.tensorflow}\n")
        if base.exists():
            shutil.rmtree(base)
        os.rename(tmp / name, base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return base


def resolve(model: str, registry, versions: list, log=print) -> str:
    """MODEL as given: "" (the example model), a zoo name (built here), or a path (as it is)."""
    if not model or model in ("example", "my_model"):
        return ""
    if model in ZOO:
        return str(ensure(model, registry, versions, log))
    if os.sep not in model and not os.path.exists(model):
        raise ModelError(f"MODEL {model!r} is neither a zoo model ({', '.join(sorted(ZOO))}) nor a path")
    return model


def exported_by(base) -> str:
    """The TensorFlow release that exported a zoo model ("" for any other model)."""
    try:
        return (Path(base) / "EXPORTED_BY").read_text().strip()
    except OSError:
        return ""

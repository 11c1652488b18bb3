"""Images for docker-compose.yml built from local parts only, for machines without a registry.

    python -m stack images --versions "2.12 2.21"   # prints the `export` lines

* tfsb-offline/base:<tag>       Debian bookworm minbase + python3 (debootstrap), the exporter's
                                packages, Debian's prometheus binary, the exporter's code;
* tfsb-offline/tfserving:<v>    the same rootfs + TensorFlow <v> and the drop-in model server, laid
                                out as the official tensorflow/serving image is: the entrypoint
                                script /usr/bin/tf_serving_entrypoint.sh (MODEL_NAME, MODEL_BASE_PATH,
                                ports 8500/8501), /usr/bin/tensorflow_model_server taking TF
                                Serving's flags, /models. The compose command line stays the official one.

Python packages go in with `uv pip install --target` on the host, so the build needs no network
inside a container. TF 2.12+ run on the rootfs' Debian python3 (3.11); older releases have no
3.11 wheels, so their image carries the host's CPython of the registry's minor (pyenv's or uv's,
built for this same Debian release) under /opt/python. The debootstrap rootfs (~45 s) is cached
as a tarball under ~/.cache/tfserving-bench/images.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from core.registry import load_registry
from core.venvs import compile_dirs, find_python, home, run_or_raise, uv_binary
from core.errors import BenchError
from core import settings

from core.settings import ROOT
MIRROR = settings.debian_mirror()
def group_pins(group: str) -> list:
    """The locked pins of one dependency group of pyproject.toml (what that component's image needs),
    never repeated here by hand."""
    proc = subprocess.run([uv_binary(), "export", "--frozen", "--only-group", group, "--no-hashes",
                           "--no-header", "--no-annotate"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"uv export --only-group {group} failed: {proc.stderr.strip()[-200:]}")
    return [ln.strip() for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith(("#", "-"))]



SITE = "/opt/tfsb/site"
USER_ID = 10001
ROOTFS_PYTHON = "3.11"  # Debian bookworm's python3
MODEL_SERVER = """#!/bin/sh
# The drop-in model server under TF Serving's binary name: same flags. Inside a container it
# listens on every interface of the container's own network; docker publishes on 127.0.0.1.
exec {python} -m modelserver --listen_address="${{TFSB_LISTEN_ADDRESS:-0.0.0.0}}" "$@"
"""
# What the official image's ENTRYPOINT does (tensorflow_serving/tools/docker/Dockerfile): serve
# $MODEL_BASE_PATH/$MODEL_NAME on TF Serving's default ports, further flags appended.
ENTRYPOINT = """#!/bin/bash
exec tensorflow_model_server --port=8500 --rest_api_port=8501 --model_name="${MODEL_NAME}" \\
  --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
"""


OFFLINE_PREFIX = "tfsb-offline/"  # the images built here (the official ones lack the allocators to preload)
# KNOBS malloc= preloads the allocators (stack/knobs.py); TF 2.12's lite/python/convert.py imports distutils.spawn,
# which Debian ships apart from python3 (without it the 2.12 container exited at once)
PACKAGES = "python3,python3-distutils,libjemalloc2,libtcmalloc-minimal4"


class ImageError(BenchError, RuntimeError):
    """One line for the user."""


def _run_image(cmd: list, what: str, **kw) -> None:
    run_or_raise(cmd, what, error=ImageError, **kw)


def _rootfs_tarball(log) -> Path:
    cache = home() / "images"
    tarball = cache / f"bookworm-minbase-{hashlib.sha256(PACKAGES.encode()).hexdigest()[:8]}.tar"
    if tarball.exists():
        return tarball
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap is missing (Debian: apt-get install debootstrap)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        log(f"images: debootstrap bookworm minbase + {PACKAGES} from {MIRROR} (about 45 s)")
        _run_image(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm", f"{tmp}/rootfs", MIRROR],
                   "debootstrap")
        _run_image(["tar", "-C", f"{tmp}/rootfs", "-cf", f"{tmp}/rootfs.tar", "."], "tar of the rootfs")
        os.replace(f"{tmp}/rootfs.tar", tarball)
    return tarball


def _code_digest(parts: list, pins: list) -> str:
    h = hashlib.sha256("\n".join(pins).encode())
    for part in parts:
        for f in sorted((ROOT / part).rglob("*.py")):
            h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return h.hexdigest()[:12]


def _image_exists(ref: str) -> bool:
    import docker

    from stack.runtime import docker_client

    client = docker_client()
    if client is None:
        raise ImageError("no docker engine answers (docker info): start dockerd to build the images")
    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(ref: str, parts: list, pins: list, no_deps: list, extra, log, salt: str = "", python: str = ROOTFS_PYTHON,
           changes: tuple = ()) -> str:
    """changes: more `docker import -c` lines (ENV, ENTRYPOINT, EXPOSE) of the image."""
    marks = [salt, python, "bytecode", "no-tf-headers", PACKAGES, *changes]  # salt: what `extra` writes
    tag = f"{ref}-{_code_digest(parts, pins + no_deps + marks)}"
    if _image_exists(tag):
        log(f"images: {tag} is up to date")
        return tag
    tarball = _rootfs_tarball(log)
    uv = uv_binary()
    with tempfile.TemporaryDirectory(dir=home() / "images") as tmp:
        rootfs = Path(tmp) / "rootfs"
        rootfs.mkdir()
        _run_image(["tar", "-C", str(rootfs), "-xf", str(tarball)], "unpacking the rootfs")
        log(f"images: installing {len(pins)} package(s) into {tag}")
        # --python: an interpreter of the image's minor, so a package without a wheel (TF 2.6's wrapt 1.12.1) is
        # built for it, not for the host's default Python
        target = ["--target", f"{rootfs}{SITE}", "--python", find_python(python),
                  "--python-platform", "x86_64-manylinux_2_28"]
        _run_image([uv, "pip", "install", "-q", *target, *pins], "uv pip install into the image")
        if no_deps:
            _run_image([uv, "pip", "install", "-q", "--no-deps", *target, *no_deps], "uv pip install --no-deps")
        # TensorFlow's C++ headers (287 MB of 1.6 GB in 2.21's image) build custom ops and are never read by a
        # server; every container create copies the image on the vfs driver (28-45 s with them, 23-35 s without).
        shutil.rmtree(rootfs / SITE.lstrip("/") / "tensorflow" / "include", ignore_errors=True)
        for part in parts:
            shutil.copytree(ROOT / part, rootfs / "app" / part, ignore=shutil.ignore_patterns("__pycache__"))
        with open(rootfs / "etc/passwd", "a") as f:
            f.write(f"tfsb:x:{USER_ID}:{USER_ID}:tfserving-bench:/app:/usr/sbin/nologin\n")
        extra(rootfs)
        # Bytecode compiled here by a host CPython of the image's minor version (same magic number): a
        # container is recreated for every cold start and batching mode, and without it each start
        # compiled TensorFlow's ~1,700 modules again (`import tensorflow` 6.0 s -> 2.2 s, TF 2.9).
        compile_dirs(find_python(python), [rootfs / SITE.lstrip("/"), rootfs / "app"])
        log(f"images: docker import {tag}")
        # The docker CLI, not the SDK: `docker import -` streams the rootfs from tar's pipe, while the
        # SDK's import_image wants the whole tarball in memory or on disk (hundreds of MB, once more).
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        cs = [arg for c in (f"ENV PYTHONPATH={SITE}:/app", "WORKDIR /app", f"USER {USER_ID}", *changes)
              for arg in ("-c", c)]
        _run_image(["docker", "import", *cs, "-", tag], "docker import", stdin=tar.stdout)
        tar.wait()
    return tag


def build_base(log=print) -> str:
    def extra(rootfs: Path) -> None:
        prometheus = shutil.which("prometheus")
        if not prometheus:
            raise ImageError("the prometheus binary is missing (Debian: apt-get install prometheus)")
        shutil.copy2(prometheus, rootfs / "bin" / "prometheus")
        (rootfs / "prometheus").mkdir()
        os.chown(rootfs / "prometheus", 65534, 65534)  # prom/prometheus runs as nobody too
    return _build(f"{OFFLINE_PREFIX}base:local", ["exporter", "fileio"], group_pins("exporter"), [], extra, log)


def _copy_python(rootfs: Path, minor: str) -> str:
    """The host's CPython `minor` into /opt/python/<minor>: its stdlib is found from the binary's
    place, libpython through LD_LIBRARY_PATH (set in the image). Returns the interpreter's path."""
    prefix = Path(find_python(minor)).resolve().parent.parent
    dest = rootfs / "opt/python" / minor
    shutil.copytree(prefix, dest, symlinks=True, ignore=shutil.ignore_patterns(
        "test", "tests", "__pycache__", "idlelib", "tkinter", "ensurepip", "site-packages"))
    (dest / "lib" / f"python{minor}" / "site-packages").mkdir(exist_ok=True)
    return f"/opt/python/{minor}/bin/python{minor}"


def build_tfserving(version_name: str | None = None, log=print) -> str:
    reg = load_registry()
    v = reg.get(version_name) if version_name else reg.newest
    python = "python3" if v.image_python == ROOTFS_PYTHON else f"/opt/python/{v.image_python}/bin/python{v.image_python}"
    script = MODEL_SERVER.format(python=python)

    def extra(rootfs: Path) -> None:
        if v.image_python != ROOTFS_PYTHON:
            _copy_python(rootfs, v.image_python)
        for name, text in (("tensorflow_model_server", script), ("tf_serving_entrypoint.sh", ENTRYPOINT)):
            path = rootfs / "usr/bin" / name
            path.write_text(text)
            path.chmod(0o755)
        (rootfs / "models").mkdir(exist_ok=True)
    # The official image's interface: its environment, ports and entrypoint.
    changes = ("ENV MODEL_NAME=model", "ENV MODEL_BASE_PATH=/models", "EXPOSE 8500 8501",
               'ENTRYPOINT ["/usr/bin/tf_serving_entrypoint.sh"]')
    if v.image_python != ROOTFS_PYTHON:
        changes += (f"ENV LD_LIBRARY_PATH=/opt/python/{v.image_python}/lib",)
    return _build(f"{OFFLINE_PREFIX}tfserving:{v.name}", ["modelserver", "fileio"], list(v.requirements(reg.server_pip)),
                  [v.serving_api], extra, log, salt=script + ENTRYPOINT, python=v.image_python, changes=changes)

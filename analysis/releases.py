"""TensorFlow releases between two registry versions, as versions a bisect can install and measure.

The list comes from PyPI's JSON API (the newest final release of each minor that has a
tensorflow-cpu wheel for this interpreter on Linux x86_64), cached in $TFSB_HOME for a day. A
release the registry does not name gets the pins of its nearest registry neighbour (the lower on
a tie: numpy<1.24 and protobuf<3.20 around 2.9, grpcio 1.74 around 2.12, none near the newest)
and the newest tensorflow-serving-api of its minor.
"""
from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.request

from fileio.atomic import write_atomic
from core.registry import Ports, Registry, Version, dist_name
from core.venvs import home
from core.errors import Unreachable

PYPI = "https://pypi.org/pypi/{}/json"
CACHE_S = 24 * 3600


class ReleaseError(Unreachable):
    """PyPI could not be read: exit 3 (the README's table)."""
    exit_code = 3


def minor(text: str) -> tuple:
    return tuple(int(p) for p in text.split(".")[:2])


def _files(dist: str) -> dict:
    """{release: [wheel file names]} of a PyPI distribution (cached)."""
    cache = home() / "pypi" / f"{dist}.json"
    if cache.exists() and time.time() - cache.stat().st_mtime < CACHE_S:
        return json.loads(cache.read_text())
    try:
        with urllib.request.urlopen(PYPI.format(dist), timeout=60) as r:
            raw = json.load(r)
    except (OSError, ValueError) as e:
        raise ReleaseError(f"cannot list the releases of {dist} on PyPI: {getattr(e, 'reason', e)}") from None
    out = {rel: [f["filename"] for f in files] for rel, files in raw.get("releases", {}).items()}
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cache, json.dumps(out))
    return out


def newest_per_minor(files: dict, python: str | None = None) -> dict:
    """{(2, 10): "2.10.1", ...}: final releases only; with python, only those with a wheel for it."""
    tag = f"cp{python.replace('.', '')}" if python else None
    out = {}
    for rel, names in files.items():
        if not re.fullmatch(r"\d+\.\d+\.\d+", rel):
            continue  # rc, post, dev
        if tag and not any(tag in n and "manylinux" in n and "x86_64" in n for n in names):
            continue
        m = minor(rel)
        if m not in out or tuple(map(int, rel.split("."))) > tuple(map(int, out[m].split("."))):
            out[m] = rel
    return out


def _index(m: tuple) -> int:
    return m[0] * 1000 + m[1]


def between(registry: Registry, lo: Version, hi: Version, python: str) -> tuple:
    """([Version per minor from lo to hi, both included], {minor name: why it cannot be measured})."""
    tf = newest_per_minor(_files("tensorflow-cpu"), python)
    any_wheel = newest_per_minor(_files("tensorflow-cpu"))
    api = newest_per_minor(_files("tensorflow-serving-api"))
    named = {minor(v.tensorflow): v for v in registry.versions.values() if not v.family}
    out, skipped = [], {}
    for m in sorted(set(any_wheel) | set(named)):
        if not minor(lo.tensorflow) <= m <= minor(hi.tensorflow):
            continue
        name = f"{m[0]}.{m[1]}"
        if m in named:
            out.append(dataclasses.replace(named[m], python=python))
        elif m not in tf:
            skipped[name] = f"tensorflow-cpu {any_wheel[m]} has no wheel for Python {python} on Linux x86_64"
        else:
            out.append(derived(registry, name, tf[m], api.get(m), python))
    return out, skipped


def derived(registry: Registry, name: str, release: str, api: str | None, python: str) -> Version:
    """A release the registry does not name, pinned like its nearest registry version."""
    named = [v for v in registry.versions.values() if not v.family]
    at = minor(release)
    near = min(named, key=lambda v: (abs(_index(minor(v.tensorflow)) - _index(at)), minor(v.tensorflow)))
    pins = [p for p in near.pip if dist_name(p) not in ("tensorflow-cpu", "tensorflow")]
    return Version(name=name, tensorflow=release, image="", gpu_image="", python=python,
                   pip=(f"tensorflow-cpu=={release}", *pins), gpu_pip=(),
                   serving_api=f"tensorflow-serving-api=={api}" if api else near.serving_api,
                   ports=Ports(grpc=near.ports.grpc, rest=near.ports.rest), pythons=(python,))

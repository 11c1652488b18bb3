"""The versions registry (stack/versions.yaml): version -> images, pins, python, ports.

    >>> from core.registry import load_registry
    >>> reg = load_registry()
    >>> reg.get("2.9").ports.rest
    8591
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from core.errors import UsageError


REGISTRY_PATH = Path(__file__).resolve().parent.parent / "stack" / "versions.yaml"  # where users edit it


class RegistryError(UsageError):
    """A user-fixable problem with the registry or a requested version."""


@dataclasses.dataclass(frozen=True)
class Ports:
    grpc: int
    rest: int


@dataclasses.dataclass(frozen=True)
class Version:
    name: str
    tensorflow: str
    image: str
    gpu_image: str
    python: str
    pip: tuple[str, ...]
    gpu_pip: tuple[str, ...]
    serving_api: str
    ports: Ports
    image_python: str = ""  # the offline docker image's interpreter
    pythons: tuple = ()     # every interpreter its wheels exist for, oldest first
    knobs: tuple = ()       # (("onednn", "0"), ...): a variant's TF settings (stack/knobs.py)
    family: str = ""  # an alias (calibration's "2.21-b") names the version whose venv and model it shares

    @property
    def key(self) -> str:
        """What venvs and model exports are keyed by: the version itself, or the one it aliases."""
        return self.family or self.name

    def requirements(self, server_pip: tuple[str, ...], gpu: bool = False) -> tuple[str, ...]:
        """Everything the version's venv resolves together (serving_api goes in --no-deps).

        A version's own pin of a server package (e.g. an older grpcio for TF 2.6)
        replaces the shared one.
        """
        own = self.gpu_pip if gpu else self.pip
        named = {dist_name(r) for r in own}
        return own + tuple(r for r in server_pip if dist_name(r) not in named)


def _minor(py: str) -> tuple:
    return tuple(int(p) for p in py.split("."))


def shared_pythons(versions: list) -> dict:
    """{version: interpreter}: the newest Python that all of them have wheels for. Where none is
    shared, the versions whose newest wheels are the oldest keep their own (TF 2.6: 3.9 only) and the
    rest share again, so only those differ. The drop-in's front end is Python: on different
    interpreters an end-to-end compare measures the interpreters as well (3.9 against 3.11 here)."""
    rest, out = list(versions), {}
    while rest:
        common = set.intersection(*(set(v.pythons or (v.python,)) for v in rest))
        if common:
            out.update({v.name: max(common, key=_minor) for v in rest})
            break
        oldest = min((max(v.pythons or (v.python,), key=_minor) for v in rest), key=_minor)
        for v in [v for v in rest if max(v.pythons or (v.python,), key=_minor) == oldest]:
            out[v.name] = oldest
            rest.remove(v)
    return out


def dist_name(requirement: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else requirement


@dataclasses.dataclass(frozen=True)
class Registry:
    versions: dict[str, Version]
    server_pip: tuple[str, ...]

    def get(self, name: str) -> Version:
        name = str(name).strip()
        if name not in self.versions:
            raise RegistryError(f"unknown version {name!r}; known versions: {', '.join(self.versions)}")
        return self.versions[name]

    def select(self, names: str | list[str]) -> list[Version]:
        """Versions from "2.6 2.9" or ["2.6", "2.9"], each on the interpreter they share
        (shared_pythons); duplicates and unknowns are errors."""
        if isinstance(names, str):
            names = names.replace(",", " ").split()
        names = [str(n).strip() for n in names]
        if not names or "" in names:
            raise RegistryError(f"no version given; known versions: {', '.join(self.versions)}")
        if len(set(names)) != len(names):
            raise RegistryError(f"version listed twice in {' '.join(names)!r}")
        chosen = [self.get(n) for n in names]
        if len(chosen) == 1:  # alone: the registry's common interpreter (load_registry), its compares' venv
            return chosen
        pythons = shared_pythons(chosen)
        return [dataclasses.replace(v, python=pythons[v.name]) for v in chosen]

    def with_alias(self, name: str, suffix: str = "-b", port_shift: int = 2) -> "Registry":
        """This registry plus a second instance of version `name`, labelled name+suffix, on ports
        shifted by port_shift: the other side of an A/A run. Same TF, venv and model."""
        v = self.get(name)
        alias = dataclasses.replace(v, name=name + suffix, family=v.key,
                                    ports=Ports(grpc=v.ports.grpc + port_shift, rest=v.ports.rest + port_shift))
        taken = {p: o.name for o in self.versions.values() for p in (o.ports.grpc, o.ports.rest)}
        clash = [p for p in (alias.ports.grpc, alias.ports.rest) if p in taken]
        if clash:
            raise RegistryError(f"the A/A instance {alias.name} would take port {clash[0]} of {taken[clash[0]]}")
        return dataclasses.replace(self, versions={**self.versions, alias.name: alias})

    @property
    def newest(self) -> Version:
        return max((v for v in self.versions.values() if not v.family), key=lambda v: tuple(int(p) for p in v.name.split(".")))


_STR_FIELDS = ("tensorflow", "image", "gpu_image", "python", "serving_api")


def _version(name: str, raw: object, where: str) -> Version:
    if not isinstance(raw, dict):
        raise RegistryError(f"{where}: version {name!r} must be a mapping")
    missing = [f for f in _STR_FIELDS + ("pip", "gpu_pip", "ports") if f not in raw]
    if missing:
        raise RegistryError(f"{where}: version {name!r} lacks {', '.join(missing)}")
    for f in _STR_FIELDS:
        if not isinstance(raw[f], (str, int, float)) or not str(raw[f]).strip():
            raise RegistryError(f"{where}: version {name!r}: {f} must be a non-empty string")
    for f in ("pip", "gpu_pip"):
        if not isinstance(raw[f], list) or not all(isinstance(p, str) for p in raw[f]):
            raise RegistryError(f"{where}: version {name!r}: {f} must be a list of requirement strings")
    ports = raw["ports"]
    if not isinstance(ports, dict) or set(ports) != {"grpc", "rest"}:
        raise RegistryError(f"{where}: version {name!r}: ports must be {{grpc: N, rest: N}}")
    for k, p in ports.items():
        if not isinstance(p, int) or not 1024 <= p <= 65535:
            raise RegistryError(f"{where}: version {name!r}: ports.{k} must be an integer in 1024..65535")
    pythons = raw.get("pythons", [raw["python"]])
    if not isinstance(pythons, list) or not pythons or not all(
            isinstance(p, str) and re.fullmatch(r"3\.\d+", p) for p in pythons):
        raise RegistryError(f"{where}: version {name!r}: pythons must be a list like [\"3.10\", \"3.11\"]")
    pythons = tuple(sorted(set(pythons), key=_minor))
    return Version(
        name=name,
        pythons=pythons,
        image_python=str(raw["python"]),
        pip=tuple(raw["pip"]),
        gpu_pip=tuple(raw["gpu_pip"]),
        ports=Ports(grpc=ports["grpc"], rest=ports["rest"]),
        **{f: str(raw[f]) for f in _STR_FIELDS if f != "python"},
        python=pythons[-1],  # replaced by load_registry's common choice; select() makes several share one
    )


def load_registry(path: str | os.PathLike | None = None) -> Registry:
    from core import settings
    from core.safe_yaml import YamlError, load_path

    path = Path(path or settings.versions_file() or REGISTRY_PATH)
    try:
        raw = load_path(path)
    except YamlError as e:
        raise RegistryError(str(e)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("versions"), dict) or not raw["versions"]:
        raise RegistryError(f"{path}: expected a mapping with a non-empty 'versions' mapping")
    server = raw.get("server") or {}
    server_pip = server.get("pip", []) if isinstance(server, dict) else None
    if not isinstance(server_pip, list) or not all(isinstance(p, str) for p in server_pip):
        raise RegistryError(f"{path}: server.pip must be a list of requirement strings")
    floats = [k for k in raw["versions"] if not isinstance(k, str)]
    if floats:  # YAML reads 2.10 as the float 2.1: never guess which was meant
        raise RegistryError(f"{path}: version {floats[0]!r} is not quoted; write versions as strings, e.g. \"2.10\"")
    versions = {k: _version(k, v, str(path)) for k, v in raw["versions"].items()}
    # Alone, a version runs on the interpreter most versions have wheels for (the newest on a tie): 3.10
    # for 2.8-2.21, so `make up VERSION=2.21` and a compare of 2.9 and 2.21 use one venv of 2.21, not two.
    share = {p: sum(p in v.pythons for v in versions.values()) for v in versions.values() for p in v.pythons}
    versions = {k: dataclasses.replace(v, python=max(v.pythons, key=lambda p: (share[p], _minor(p))))
                for k, v in versions.items()}
    seen: dict[int, str] = {}
    for v in versions.values():
        for p in (v.ports.grpc, v.ports.rest):
            if p in seen:
                raise RegistryError(f"{path}: port {p} used by both {seen[p]} and {v.name}")
            seen[p] = v.name
    return Registry(versions=versions, server_pip=tuple(server_pip))

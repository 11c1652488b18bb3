"""The docker runtime: docker-compose.yml, driven by `make up/down/status RUNTIME=docker`.

`up` writes .env once (Grafana's admin password, mode 0600), exports the example model
for each version (models/build/tf<v>/my_model, mounted read-only), adds the versions to
Prometheus' file_sd targets (.state/docker/targets/tfserving.json) and starts their
profiles; `down` stops every service and keeps the named volumes (Prometheus' TSDB)
unless `make clean`.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from fileio.atomic import write_atomic
from core import ports
from stack.promconfig import service
from core.registry import load_registry
from core.errors import BenchError
from core import settings

from core.settings import ROOT
MONITORING = ["prometheus", "exporter", "grafana"]


class DockerError(BenchError, RuntimeError):
    """One line for the user."""


def project() -> str:
    return settings.compose_project()


def compose_command() -> list:
    """`docker compose` (v2) where the plugin exists, else Debian's `docker-compose` 1.29."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        base = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        base = ["docker-compose"]
    else:
        raise DockerError("neither `docker compose` nor `docker-compose` is installed (Debian: apt-get install "
                          "docker-compose), or use RUNTIME=local")
    files = ["-f", str(ROOT / "docker-compose.yml")]
    if settings.gpu():
        files += ["-f", str(ROOT / "docker-compose.gpu.yml")]
    return base + ["-p", project(), "--project-directory", str(ROOT), *files]


def placement_env() -> dict:
    """The cpusets compose pins the servers and the load generator to (empty: not pinned)."""
    from core.placement import Placement, isolate_from_env, plan

    p = plan(None, isolate_from_env())
    if not p.isolated:
        return {"TFSB_SERVER_CPUSET": "", "TFSB_CLIENT_CPUSET": ""}
    return {"TFSB_SERVER_CPUSET": Placement.cpuset(p.servers), "TFSB_CLIENT_CPUSET": Placement.cpuset(p.client)}


def compose(*args, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, TFSB_TARGETS_DIR=str(targets_file().parent),  # the file_sd mount (compose.py)
               **placement_env(), **ports.compose_env(load_registry().versions.values()))
    proc = subprocess.run(compose_command() + list(args), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        tail = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()][-3:]
        raise DockerError(f"docker compose {args[0]} failed: {' / '.join(tail)}")
    return proc


def ensure_env_file(path: Path = ROOT / ".env") -> Path:
    """Grafana's admin password, generated once and readable by the owner only (never admin/admin)."""
    if path.exists():
        os.chmod(path, 0o600)
        return path
    sock = Path("/var/run/docker.sock")
    gid = sock.stat().st_gid if sock.exists() else 0
    text = (f"# written by `make up` (docker runtime); keep it private\n"
            f"GRAFANA_ADMIN_PASSWORD={secrets.token_urlsafe(18)}\nDOCKER_GID={gid}\n")
    write_atomic(path, text, mode=0o600)
    return path


def targets_file() -> Path:
    """Prometheus' file_sd list of the versions `up` started, in this stack's state directory."""
    return settings.state_root() / "docker" / "targets" / "tfserving.json"


def write_targets(names: list) -> None:
    path = targets_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    groups = [{"targets": [f"{service(n)}:8501"], "labels": {"version": n}} for n in sorted(set(names))]
    write_atomic(path, json.dumps(groups, indent=1) + "\n")


def targeted_versions() -> list:
    try:
        return [g["labels"]["version"] for g in json.loads(targets_file().read_text())]
    except (OSError, ValueError, KeyError):
        return []


def up(versions: list, registry, without: tuple = (), log=print) -> dict:
    from models.prepare import ensure_example_model

    ensure_env_file()
    for v in versions:
        model = ensure_example_model(v, registry, log=log)
        for d in [model, *(p for p in model.iterdir() if p.is_dir())]:
            d.chmod(0o755)  # older exports were 0700; the server in the container is another user
    names = sorted(set(targeted_versions()) | {v.name for v in versions})
    write_targets(names)  # before Prometheus starts: it reads the file on start and on change
    profiles = [a for n in names for a in ("--profile", n)]
    services = [service(n) for n in names] + [s for s in MONITORING if s not in without]
    log(f"docker compose up: {' '.join(services)}")
    compose(*profiles, "up", "-d", *services)
    wait_healthy([service(v.name) for v in versions], log=log)
    return {"versions": names, "services": services}


BENCH_LABEL = "tfsb.project"  # on every container a compare or scenario creates (stack/docker_serving.py)


def _client():
    from stack.runtime import docker_client

    client = docker_client()
    if client is None:
        raise DockerError("no docker engine answers (docker info); start dockerd or use RUNTIME=local")
    return client


def _containers(svc: str | None = None) -> list:
    """The project's containers (of one compose service), through the docker SDK."""
    labels = [f"com.docker.compose.project={project()}"] + ([f"com.docker.compose.service={svc}"] if svc else [])
    return _client().containers.list(all=True, filters={"label": labels})


def container_health(svc: str) -> str:
    found = _containers(svc)
    if not found:
        return "missing"
    state = found[0].attrs.get("State", {})
    health = (state.get("Health") or {}).get("Status", "")
    return f"{state.get('Status', 'missing')} {health}".strip()


def wait_healthy(services: list, timeout_s: float = 300, log=print) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(services)
    while pending and time.monotonic() < deadline:
        for svc in list(pending):
            state = container_health(svc)
            if state.endswith("healthy") and not state.endswith("unhealthy"):
                log(f"  {svc}: healthy")
                pending.remove(svc)
            elif state.startswith(("exited", "dead", "missing", "restarting")):
                logs = compose("logs", "--tail", "5", svc, check=False).stdout.strip().splitlines()[-3:]
                raise DockerError(f"{svc} is {state}: {' / '.join(logs)}")
        time.sleep(1)
    if pending:
        raise DockerError(f"{', '.join(pending)} not healthy within {timeout_s:.0f}s (docker compose logs)")


def down(volumes: bool = False) -> None:
    remove_all(_client())  # the containers a compare or scenario made (stack/docker_serving.py)
    compose("--profile", "all", "--profile", "load", "down", *(["-v"] if volumes else []))
    write_targets([])


def status() -> list:
    """(service, state) for the project's containers and for every version `up` started."""
    services = [c.labels.get("com.docker.compose.service", "") for c in _containers()] + \
        [service(n) for n in targeted_versions()]
    return [(svc, container_health(svc)) for svc in dict.fromkeys(services)]


def remove_all(client=None) -> int:
    """Every bench container of this project (`make down`); how many."""
    client = client or _client()
    found = client.containers.list(all=True, filters={"label": f"{BENCH_LABEL}={project()}"})
    for c in found:
        c.remove(force=True)
    return len(found)

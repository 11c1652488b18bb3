"""The local runtime: model servers from per-version venvs, as processes with pid files.

Each version gets .state/local/tf<version>/ with its rendered models.config (the
repo's monitoring_configs/models.config with base_path pointed at that version's
export), its pid file and its log. `down` stops exactly what has a pid file.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from google.protobuf import text_format

from fileio.atomic import write_atomic
from models.prepare import MODEL_NAME, ROOT, check_base_path, ensure_example_model
from core import ports
from core.paths import CONFIGS
from stack import knobs, procs
from core.registry import Registry, Version
from core.venvs import ensure_venv, venv_python
from core.errors import BenchError
from core import settings



def state_dir() -> Path:
    return settings.state_root() / "local"


def version_dir(version: Version) -> Path:
    return state_dir() / f"tf{version.name}"


class StackError(BenchError, RuntimeError):
    """Bringing something up failed; the message says what and where its log is."""


def render_models_config(base_path: Path, model_name: str) -> str:
    """monitoring_configs/models.config with the model's name and local base_path."""
    from tensorflow_serving.config import model_server_config_pb2

    cfg = text_format.Parse((CONFIGS / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())
    first = cfg.model_config_list.config[0]
    first.name, first.base_path = model_name, str(base_path)
    del cfg.model_config_list.config[1:]
    return text_format.MessageToString(cfg)


def server_command(python: str, version: Version, cfg_path: Path, batching: bool = True,
                   bind: str = "127.0.0.1", batching_file: Path | None = None, poll_s: int = 1) -> list:
    """The tensorflow_model_server command line; the same flags the docker runtime passes."""
    cmd = [python, "-m", "modelserver", f"--port={ports.grpc(version)}", f"--rest_api_port={ports.rest(version)}",
           f"--model_config_file={cfg_path}", f"--monitoring_config_file={CONFIGS / 'monitoring.config'}",
           f"--file_system_poll_wait_seconds={poll_s}", f"--listen_address={bind}",
           f"--version_label={version.name}", *knobs.flags(version.knobs)]
    if batching:
        cmd += ["--enable_batching=true", f"--batching_parameters_file={batching_file or CONFIGS / 'batching.config'}"]
    return cmd


def version_states(port: int, model: str, timeout: float = 1.0) -> dict:
    """{version: state} of every version the local server reports ({} when it doesn't answer)."""
    from stack.serving import Server, model_states

    return model_states(Server("", "127.0.0.1", port, None, "", model), timeout)


def model_status(port: int, model: str, timeout: float = 1.0) -> str | None:
    """The state of the newest version (e.g. AVAILABLE), or None when the server doesn't answer."""
    return next(iter(version_states(port, model, timeout).values()), None)


def running_mode(version: Version) -> dict | None:
    """How the version's running server was started ({"batching", "cpus", ...}), None if it is not."""
    d = version_dir(version)
    if not procs.alive(procs.read_pid(d / "modelserver.pid"), "modelserver"):
        return None
    try:
        return json.loads((d / "modelserver.json").read_text())
    except (OSError, ValueError):
        return {}


def up_version(version: Version, registry: Registry, model_path: str | None = None, model_name: str = MODEL_NAME,
               batching: bool = True, bind: str = "127.0.0.1", timeout_s: float = 180,
               batching_file: Path | None = None, cpus: list | None = None, log=print) -> dict:
    """Start the version's model server (cpus: pin it there) unless it already runs."""
    from core.placement import pin_child

    d = version_dir(version)
    d.mkdir(parents=True, exist_ok=True)
    pid_file, log_file = d / "modelserver.pid", d / "modelserver.log"
    info = {"version": version.name, "rest": ports.rest(version), "grpc": ports.grpc(version), "pid_file": str(pid_file)}
    base = check_base_path(model_path) if model_path else ensure_example_model(version, registry, log=log)
    if procs.alive(procs.read_pid(pid_file), "modelserver"):
        serving = (running_mode(version) or {}).get("model")
        if not serving or serving == str(base):
            log(f"TF Serving {version.name}: already running (pid {procs.read_pid(pid_file)})")
            return info
        # another model than asked for (a compare of a zoo model before): a server answering for the wrong
        # model would refuse every request of this one
        log(f"TF Serving {version.name}: serves {serving}; restarting it with {base}")
        procs.stop(pid_file)
    for port, what in ((info["rest"], "REST"), (info["grpc"], "gRPC")):
        stale = own_server_on(port, version)
        if stale:  # a server of this stack under another name (an alias or knob variant of an earlier compare)
            log(f"TF Serving {version.name}: port {port} is held by this stack's {stale.parent.name[2:]}; stopping it")
            procs.stop(stale)
        if procs.port_in_use(port, bind):
            raise StackError(f"port {port} ({what} of TF Serving {version.name}) is taken by another process; "
                             "stop it, or shift the stack's ports with TFSB_PORT_OFFSET=<n>")
    python = venv_python(ensure_venv(version, registry, log=log))
    cfg = d / "models.config"
    write_atomic(cfg, render_models_config(base, model_name))
    cmd = server_command(python, version, cfg, batching=batching, bind=bind, batching_file=batching_file)
    pid = procs.start(cmd, pid_file, log_file, env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2",
                                                                 **knobs.env(version.knobs)),
                      cwd=ROOT, preexec_fn=pin_child(cpus) if cpus else None)
    write_atomic(d / "modelserver.json", json.dumps({"batching": batching, "model": str(base), "cpus": cpus,
                                                           "batching_file": str(batching_file or "")}))
    log(f"TF Serving {version.name}: starting (pid {pid}, TensorFlow {version.tensorflow}), log {log_file}")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            pid_file.unlink(missing_ok=True)
            raise StackError(f"TF Serving {version.name} exited: {procs.log_tail(log_file, 1)}")
        if model_status(ports.rest(version), model_name) == "AVAILABLE":
            return info
        time.sleep(0.25)
    procs.stop(pid_file)
    failed = [ln for ln in procs.log_tail(log_file, 40).split(" | ") if "failed to load" in ln]
    why = ": " + failed[-1].split("failed to load", 1)[1].strip() if failed else ""
    raise StackError(f"TF Serving {version.name} did not become AVAILABLE within {timeout_s:.0f}s{why}; see {log_file}")


def own_server_on(port: int, version: Version) -> Path | None:
    """The pid file of a running server of this state directory, another than `version`'s, listening on port
    (read from its command line: the flags server_command wrote)."""
    root = state_dir()
    for pid_file in sorted(root.glob("tf*/modelserver.pid")) if root.exists() else []:
        pid = procs.read_pid(pid_file)
        if pid_file.parent == version_dir(version) or not procs.alive(pid, "modelserver"):
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--port={port}".encode() in args or f"--rest_api_port={port}".encode() in args:
            return pid_file
    return None


def down(log=print) -> int:
    stopped = 0
    root = state_dir()
    for pid_file in sorted(root.glob("*/*.pid")) if root.exists() else []:
        name = f"{pid_file.parent.name}/{pid_file.stem}"
        if procs.stop(pid_file):
            log(f"stopped {name}")
            stopped += 1
    return stopped


def status(registry: Registry) -> list:
    """What `up` started: each component's pid, whether it runs, and what it answers."""
    rows = []
    for v in registry.versions.values():
        pid_file = version_dir(v) / "modelserver.pid"
        if not pid_file.exists():
            continue
        pid = procs.read_pid(pid_file)
        running = procs.alive(pid, "modelserver")
        state = model_status(ports.rest(v), MODEL_NAME) if running else None
        rows.append({"component": f"modelserver {v.name}", "pid": pid, "running": running,
                     "state": state or ("no answer" if running else "down"),
                     "url": f"http://127.0.0.1:{ports.rest(v)}/v1/models/{MODEL_NAME}"})
    for name, needle, url in (("exporter", "exporter", f"http://127.0.0.1:{ports.port(ports.EXPORTER)}/metrics"),
                              ("prometheus", "prometheus", f"http://127.0.0.1:{ports.port(ports.PROMETHEUS)}")):
        pid_file = state_dir() / name / f"{name}.pid"
        if pid_file.exists():
            pid = procs.read_pid(pid_file)
            running = procs.alive(pid, needle)
            rows.append({"component": name, "pid": pid, "running": running, "state": "up" if running else "down",
                         "url": url})
    return rows

"""The local runtime's Serving: model servers as processes of per-version venvs, with pid files."""
from __future__ import annotations

import time
from pathlib import Path

from core.venvs import ensure_venv, venv_python
from models.prepare import check_base_path, ensure_example_model
from stack import local, monitoring, procs
from stack.serving import Server, first_predict_ms, local_server, newest_version_dir


class LocalServing:
    """Model servers of the local runtime: per-version venvs, processes with pid files."""

    kind = "local"
    prometheus_url = None  # the stack's own

    def __init__(self, registry, versions: list, model_path: str | None = None, cpus: list | None = None,
                 log=print, model_for: dict | None = None):
        """model_for: {server name: model base} where one server serves another model than the rest (a
        calibration's positive control, MODEL_B)."""
        self.registry, self.versions, self.model_path, self.cpus, self.log = registry, versions, model_path, cpus, log
        self.model_for = dict(model_for or {})
        self.servers = [local_server(v) for v in versions]
        self._by_name = {v.name: v for v in versions}

    def model_of(self, v) -> str | None:
        """The model base a version's server serves (None: the example model)."""
        return self.model_for.get(v.name, self.model_path)

    def check(self, protocols) -> None:
        """Servers started here: their addresses are the registry's, and `up` waits until they answer."""

    def up(self, batching: bool) -> None:
        """Every server running in this batching mode (and placement); restarted where it differs."""
        with procs.state_lock(local.state_dir(), "compare"):
            for v in self.versions:
                mode = local.running_mode(v)
                model = self.model_of(v)
                if mode is not None and (mode.get("batching") != batching or mode.get("cpus") != self.cpus or (
                        model and mode.get("model") != str(Path(model).resolve()))):
                    procs.stop(local.version_dir(v) / "modelserver.pid")
                local.up_version(v, self.registry, model_path=model, batching=batching, cpus=self.cpus,
                                 log=lambda *_: None)

    def cold_start(self, server: Server, batching: bool, first_request=None) -> dict:
        """Restart one server and time process start -> AVAILABLE -> first successful request (first_request(server):
        its (path suffix, body), built once the server answers its metadata; None: the example model's)."""
        v = self._by_name[server.name]
        with procs.state_lock(local.state_dir(), "compare"):
            procs.stop(local.version_dir(v) / "modelserver.pid")
            t0 = time.perf_counter()
            local.up_version(v, self.registry, model_path=self.model_of(v), batching=batching, cpus=self.cpus,
                             log=lambda *_: None)
            t_avail = time.perf_counter()
        first = first_predict_ms(server, request=first_request(server) if first_request else None)
        return {"to_available_s": t_avail - t0, "first_request_ms": first,
                "to_first_predict_s": time.perf_counter() - t0,
                "peak_rss_bytes": procs.peak_rss(procs.read_pid(local.version_dir(v) / "modelserver.pid"))}

    def restart(self, server: Server, batching: bool = True, batching_file=None, model_path=None) -> None:
        """Restart one server in this mode (a sweep's next batching file, a hot update's model base)."""
        v = self._by_name[server.name]
        with procs.state_lock(local.state_dir(), "compare"):
            procs.stop(local.version_dir(v) / "modelserver.pid")
            local.up_version(v, self.registry, batching=batching, batching_file=batching_file,
                             model_path=model_path or self.model_of(v), cpus=self.cpus, log=lambda *_: None)

    def resources(self, server: Server) -> None:
        """Processes, not containers: their memory and CPU come from the exporter through Prometheus."""
        return None

    def monitoring(self, sla_p99_ms: float) -> str:
        """Exporter and Prometheus up (Prometheus scraping these servers); its URL."""
        monitoring.up_exporter(log=lambda *_: None)
        return monitoring.up_prometheus(self.registry, sla_p99_ms=sla_p99_ms, log=lambda *_: None)

    def model_dir(self, server: Server) -> Path:
        """The newest version directory of the model the server serves (its requests' parse spec, the ceiling's
        model)."""
        v = self._by_name[server.name]
        model = self.model_of(v)
        return newest_version_dir(check_base_path(model) if model else
                                  ensure_example_model(v, self.registry, log=lambda *_: None))

    def ceiling_command(self, server: Server) -> tuple:
        """(python of the server's own TF venv, its model's newest version directory)."""
        v = self._by_name[server.name]
        return venv_python(ensure_venv(v, self.registry, log=lambda *_: None)), self.model_dir(server)

    def server_path(self, server: Server, host_path: Path) -> str:
        """The path the server reads a file of this machine by (a second model's base, for a config reload)."""
        return str(Path(host_path).resolve())

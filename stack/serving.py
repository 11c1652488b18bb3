"""The model servers a comparison drives, whoever started them: one small interface.

analysis/ asks a Serving for its servers (name, addresses, metrics endpoint), to bring them up
in a batching mode, to cold-start or restart one (another batching file or model base), for a
container's resources, to bring up monitoring, and where each version's own TensorFlow can be
run in-process (the ceiling); it never reaches into pid files, ports or containers. Three kinds:
LocalServing (processes), DockerServing (stack/docker_serving.py: containers), ExternalServing
(started elsewhere); serving_for(runtime, ...) picks one.

    serving = LocalServing(registry, registry.select("2.9 2.21"))
    serving.up(batching=True)
    for s in serving.servers: print(s.name, s.address("grpc"), s.metrics_url)
"""
from __future__ import annotations

import dataclasses
import json
import re
import time
import typing
from pathlib import Path

from fileio import http
from stack import ports


@typing.runtime_checkable
class Serving(typing.Protocol):
    """The contract every runtime implements in full (LocalServing here, DockerServing in
    stack/docker_serving.py, ExternalServing here); where a runtime cannot do a thing it does nothing and says
    so in its return value (an external server has no cold start: None), so callers never ask which kind
    they hold. serving_for() picks one."""

    kind: str                     # "local", "docker", "external": for the report, never to branch on
    servers: list                 # [Server], the baseline first
    model_for: dict               # {server name: model base} where one serves another model (MODEL_B)
    cpus: list | None             # the servers' cores (an isolated placement); None: this machine's
    prometheus_url: str | None    # a Prometheus something else runs; None: the stack's own

    def up(self, batching) -> None: ...

    def cold_start(self, server: "Server", batching, first_request=None) -> dict | None: ...

    def restart(self, server: "Server", batching: bool = True, batching_file=None, model_path=None) -> None: ...

    def resources(self, server: "Server") -> dict | None: ...

    def monitoring(self, sla_p99_ms: float) -> str: ...

    def model_dir(self, server: "Server") -> Path | None: ...

    def ceiling_command(self, server: "Server") -> tuple: ...

    def server_path(self, server: "Server", host_path: Path) -> str | None: ...


class Unreachable(ValueError):
    """A server or Prometheus that does not answer at its address: exit 3 (the README's table), not 2."""
    exit_code = 3


@dataclasses.dataclass(frozen=True)
class Server:
    name: str                # the label of its series and report rows: "2.9", "2.21-b"
    host: str
    rest: int | None
    grpc: int | None
    metrics_url: str
    model: str = "my_model"
    tensorflow: str = ""     # the TF release it runs, when known
    knobs: tuple = ()        # a variant's TF settings (stack/knobs.py), also applied to its ceiling

    def address(self, protocol: str) -> tuple:
        port = self.rest if protocol == "rest" else self.grpc
        if not port:
            raise ValueError(f"{self.name} has no {protocol} address")
        return self.host, port


def local_server(version) -> Server:
    """The server of a registry version in the local runtime (its ports, after TFSB_PORT_OFFSET)."""
    rest = ports.rest(version)
    return Server(version.name, "127.0.0.1", rest, ports.grpc(version),
                  f"http://127.0.0.1:{rest}/monitoring/prometheus/metrics", tensorflow=version.tensorflow,
                  knobs=version.knobs)


class Refused(RuntimeError):
    """A server that answered an inference request with an error, or closed the connection: exit 3."""
    exit_code = 3


def first_predict_ms(server: Server, timeout: float = 30, request: tuple | None = None) -> float:
    """One inference request over REST, timed: request = (path suffix such as ":classify", JSON body), from
    the model's request set; None: a single all-0.5 row of the example model's shape. An error answer is
    Refused, with the server's own words."""
    suffix, body = request or (":predict", json.dumps({"instances": [[0.5] * 784]}).encode())
    url = f"http://{server.host}:{server.rest}/v1/models/{server.model}{suffix}"
    t0 = time.perf_counter()
    try:
        http.get(url, data=body, headers={"Content-Type": "application/json"}, timeout_s=timeout)
    except http.HTTPStatusError as e:
        raise Refused(f"{server.name} answered its first request ({url}) with HTTP {e.code}: {e.said}") from None
    except OSError as e:
        raise Refused(f"{server.name} did not answer its first request ({url}): {e}") from None
    return (time.perf_counter() - t0) * 1000


def newest_version_dir(base: Path) -> Path:
    """<base>/<n> with the largest n holding a saved_model.pb (TF Serving's default version policy)."""
    return max((d for d in Path(base).iterdir() if re.fullmatch(r"[0-9]+", d.name) and (d / "saved_model.pb").exists()),
               key=lambda d: int(d.name))


def model_states(server: Server, timeout: float = 1.0) -> dict:
    """{version: state} the server reports for its model ({} when it does not answer)."""
    try:
        answer = http.get(f"http://{_url_host(server.host)}:{server.rest}/v1/models/{server.model}", timeout_s=timeout)
        return {s["version"]: s["state"] for s in json.loads(answer)["model_version_status"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def wait_states(server: Server, done, t0: float, timeout_s: float) -> float | None:
    """Seconds from t0 (time.monotonic) until the model's {version: state} satisfies done(states), polled every
    50 ms; None when it did not within timeout_s of t0 (a reload's switch, a neighbour's load)."""
    while time.monotonic() - t0 < timeout_s:
        if done(model_states(server)):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def newest_state(server: Server) -> str | None:
    """The state of the server's newest model version (AVAILABLE once it serves), None if it does not answer."""
    states = model_states(server)
    return states[max(states, key=int)] if states else None


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

    def up(self, batching: bool) -> None:
        """Every server running in this batching mode (and placement); restarted where it differs."""
        from stack import local, procs

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
        from stack import local, procs

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
        from stack import local, procs

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
        from stack import monitoring

        monitoring.up_exporter(log=lambda *_: None)
        return monitoring.up_prometheus(self.registry, sla_p99_ms=sla_p99_ms, log=lambda *_: None)

    def model_dir(self, server: Server) -> Path:
        """The newest version directory of the model the server serves (its requests' parse spec, the ceiling's
        model)."""
        from models.prepare import check_base_path, ensure_example_model

        v = self._by_name[server.name]
        model = self.model_of(v)
        return newest_version_dir(check_base_path(model) if model else
                                  ensure_example_model(v, self.registry, log=lambda *_: None))

    def ceiling_command(self, server: Server) -> tuple:
        """(python of the server's own TF venv, its model's newest version directory)."""
        from stack.venvs import ensure_venv, venv_python

        v = self._by_name[server.name]
        return venv_python(ensure_venv(v, self.registry, log=lambda *_: None)), self.model_dir(server)

    def server_path(self, server: Server, host_path: Path) -> str:
        """The path the server reads a file of this machine by (a second model's base, for a config reload)."""
        return str(Path(host_path).resolve())


def parse_targets(text: str) -> list:
    """Servers something else started: "2.9=grpc://host:8500,rest://host:8501 2.21=..." (a version's
    addresses, comma-separated; metrics=http://host:port/path when it is not the REST port's default
    /monitoring/prometheus/metrics). Names are labels: the report's rows and Prometheus' `version`."""
    from stack.paths import check_name

    servers = []
    for item in text.split():
        name, sep, spec = item.partition("=")
        if not sep or not spec:
            raise ValueError(f"TARGETS entry {item!r}: expected NAME=grpc://HOST:PORT[,rest://HOST:PORT]")
        check_name(name, "TARGETS name")
        found = {}
        for part in spec.split(","):
            m = re.fullmatch(r"(rest|grpc)://([\w.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})|metrics=(https?://\S+)", part)
            if not m:
                raise ValueError(f"TARGETS entry {item!r}: {part!r} is not rest://HOST:PORT, grpc://HOST:PORT or "
                                 "metrics=http://...")
            kind = "metrics" if m.group(4) else m.group(1)
            if kind in found:  # the last one silently won before
                raise ValueError(f"TARGETS entry {item!r}: two {kind} addresses; give one of each")
            if m.group(4):
                found["metrics"] = m.group(4)
            elif not 1 <= int(m.group(3)) <= 65535:
                raise ValueError(f"TARGETS entry {item!r}: port {m.group(3)} is outside 1..65535")
            else:
                found[m.group(1)] = (m.group(2).strip("[]"), int(m.group(3)))
        if "rest" not in found and "grpc" not in found:
            raise ValueError(f"TARGETS entry {item!r} has no rest:// or grpc:// address")
        # TF Serving serves its metrics on the REST port; with only a gRPC address, the port after it
        # (8500 -> 8501, TF Serving's own pairing) unless metrics= says otherwise.
        host, port = found["rest"] if "rest" in found else (found["grpc"][0], found["grpc"][1] + 1)
        rest = found.get("rest", (None, None))[1]
        metrics = found.get("metrics") or f"http://{_url_host(host)}:{port}/monitoring/prometheus/metrics"
        servers.append(Server(name, host, rest, found.get("grpc", (None, None))[1], metrics))
    if len({s.name for s in servers}) != len(servers) or not servers:
        raise ValueError(f"TARGETS must name each server once, got {text!r}")
    return servers


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class ExternalServing:
    """Servers and a Prometheus that something else started (another machine, a cluster's Services
    through port-forwards or in-cluster): nothing is brought up, restarted or cold-started; their
    batching is whatever they were deployed with. The TF ceiling is measured where the name is a
    version of stack/versions.yaml (its local venv, on MODEL or the example model), else skipped."""

    kind = "external"
    model_for: dict = {}  # every server serves what it was deployed with
    cpus = None           # its servers' cores are not this machine's to pin

    def __init__(self, servers: list, prometheus_url: str, registry, model_path: str | None = None,
                 model_name: str = "my_model"):
        known = {n: v.tensorflow for n, v in registry.versions.items()}
        self.servers = [dataclasses.replace(s, model=model_name, tensorflow=known.get(s.name, s.tensorflow))
                        for s in servers]
        self.prometheus_url, self.registry = prometheus_url.rstrip("/"), registry
        self.model_path, self.model_name = model_path, model_name

    def check(self, protocols) -> None:
        """Every server has an address for each protocol and answers on its metrics endpoint: said now,
        before a run is recorded."""
        from analysis import counters

        for s in self.servers:
            for p in protocols:
                if not (s.rest if p == "rest" else s.grpc):
                    raise ValueError(f"TARGETS: {s.name} has no {p}:// address; add one or choose PROTOCOL="
                                     + ("grpc" if p == "rest" else "rest"))
            try:
                families = counters.read(s.metrics_url)
            except OSError as e:
                raise Unreachable(f"TARGETS: cannot read the metrics of {s.name} at {s.metrics_url} "
                                 f"({getattr(e, 'reason', e)}); is --monitoring_config_file set? "
                                 "(or give metrics=URL)") from None
            except (ValueError, UnicodeDecodeError):
                families = {}
            if not families.get("tensorflow_families"):
                raise ValueError(f"TARGETS: {s.metrics_url} answers, but not with TF Serving's metrics page (no "
                                 f":tensorflow: family): is it {s.name}'s REST port? (or give metrics=URL)")
        self.check_prometheus()

    def check_prometheus(self) -> None:
        """PROMETHEUS answers the HTTP API in its shape: a known query, checked, before anything is
        measured (a typo pointing at the exporter once failed after the whole run)."""
        from stack.targets import query

        try:
            result = query(self.prometheus_url, "vector(1)")
            ok = isinstance(result, list) and len(result) == 1 and float(result[0]["value"][1]) == 1.0
        except http.HTTPStatusError:  # it answers, with an error page
            ok = False
        except OSError as e:
            raise Unreachable(f"PROMETHEUS: cannot reach {self.prometheus_url} ({getattr(e, 'reason', e)})") from None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RuntimeError):
            ok = False
        if not ok:
            raise ValueError(f"PROMETHEUS: {self.prometheus_url} does not answer Prometheus' HTTP API "
                             "(/api/v1/query?query=vector(1) gave no [{\"value\": [t, \"1\"]}]): is it Prometheus?")

    def up(self, batching) -> None:
        """Nothing to bring up: they run as deployed."""

    def cold_start(self, server: Server, batching, first_request=None) -> None:
        """Not ours to restart: no cold start is timed (the report says so)."""
        return None

    def restart(self, server: Server, batching: bool = True, batching_file=None, model_path=None) -> None:
        raise ValueError(f"{server.name} runs elsewhere (TARGETS): it cannot be restarted from here")

    def resources(self, server: Server) -> None:
        """Not ours to inspect: their memory and CPU are whatever their Prometheus has."""
        return None

    def monitoring(self, sla_p99_ms: float) -> str:
        return self.prometheus_url

    def model_dir(self, server: Server) -> Path | None:
        """MODEL's newest version directory where it was given (None: not on this machine)."""
        from models.prepare import check_base_path

        return newest_version_dir(check_base_path(self.model_path)) if self.model_path else None

    def server_path(self, server: Server, host_path: Path) -> None:
        """Servers started elsewhere read their own file systems."""
        return None

    def ceiling_command(self, server: Server) -> tuple:
        """As LocalServing's, or (None, why not)."""
        if server.name not in self.registry.versions:
            return None, f"{server.name} is not a version of stack/versions.yaml: no local runtime of its TensorFlow"
        if self.model_name != "my_model" and not self.model_path:
            return None, f"the servers serve {self.model_name}; give its export as MODEL to measure the ceiling"
        return LocalServing(self.registry, [self.registry.get(server.name)], self.model_path,
                            log=lambda *_: None).ceiling_command(server)


def serving_for(runtime: str, registry, versions: list, model_path: str | None = None, cpus: list | None = None,
                log=print, model_for: dict | None = None):
    """The Serving of a runtime picked by stack.runtime.pick_runtime ("local" or "docker")."""
    if runtime == "docker":
        from stack.docker_serving import DockerServing

        return DockerServing(registry, versions, model_path, cpus=cpus, log=log, model_for=model_for)
    return LocalServing(registry, versions, model_path, cpus=cpus, log=log, model_for=model_for)

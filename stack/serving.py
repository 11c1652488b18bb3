"""The model servers a comparison drives, whoever started them: one small interface.

analysis/ asks a Serving for its servers (name, addresses, metrics endpoint), to bring them up
in a batching mode, to cold-start or restart one (another batching file or model base), for a
container's resources, to bring up monitoring, and where each version's own TensorFlow can be
run in-process (the ceiling); it never reaches into pid files, ports or containers. This module is the
contract alone; three runtimes implement it, each in its own module: LocalServing (stack/local_serving.py:
processes), DockerServing (stack/docker_serving.py: containers), ExternalServing (stack/external.py: started
elsewhere); stack.runtimes.serving_for(runtime, ...) picks one.

    serving = serving_for("local", registry, registry.select("2.9 2.21"))
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
from core import ports
from core import errors
from core.errors import UsageError


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

    def check(self, protocols) -> None: ...  # before a run is recorded: what can be checked of its servers

    def up(self, batching) -> None: ...

    def cold_start(self, server: "Server", batching, first_request=None) -> dict | None: ...

    def restart(self, server: "Server", batching: bool = True, batching_file=None, model_path=None) -> None: ...

    def resources(self, server: "Server") -> dict | None: ...

    def monitoring(self, sla_p99_ms: float) -> str: ...

    def model_dir(self, server: "Server") -> Path | None: ...

    def ceiling_command(self, server: "Server") -> tuple: ...

    def server_path(self, server: "Server", host_path: Path) -> str | None: ...


class Unreachable(errors.Unreachable, ValueError):
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
            raise UsageError(f"{self.name} has no {protocol} address")
        return self.host, port


def local_server(version) -> Server:
    """The server of a registry version in the local runtime (its ports, after TFSB_PORT_OFFSET)."""
    rest = ports.rest(version)
    return Server(version.name, "127.0.0.1", rest, ports.grpc(version),
                  f"http://127.0.0.1:{rest}/monitoring/prometheus/metrics", tensorflow=version.tensorflow,
                  knobs=version.knobs)


class Refused(errors.Failed):
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


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host

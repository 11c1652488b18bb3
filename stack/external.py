"""Servers and a Prometheus something else started (TARGETS=, PROMETHEUS=): their Serving, and TARGETS' syntax."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from core.paths import check_name
from fileio import http
from models.prepare import check_base_path
from stack import counters
from stack.local_serving import LocalServing
from stack.serving import Server, Unreachable, _url_host, newest_version_dir
from stack.targets import query
from core.errors import UsageError


def parse_targets(text: str) -> list:
    """Servers something else started: "2.9=grpc://host:8500,rest://host:8501 2.21=..." (a version's
    addresses, comma-separated; metrics=http://host:port/path when it is not the REST port's default
    /monitoring/prometheus/metrics). Names are labels: the report's rows and Prometheus' `version`."""
    servers = []
    for item in text.split():
        name, sep, spec = item.partition("=")
        if not sep or not spec:
            raise UsageError(f"TARGETS entry {item!r}: expected NAME=grpc://HOST:PORT[,rest://HOST:PORT]")
        check_name(name, "TARGETS name")
        found = {}
        for part in spec.split(","):
            m = re.fullmatch(r"(rest|grpc)://([\w.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})|metrics=(https?://\S+)", part)
            if not m:
                raise UsageError(f"TARGETS entry {item!r}: {part!r} is not rest://HOST:PORT, grpc://HOST:PORT or "
                                 "metrics=http://...")
            kind = "metrics" if m.group(4) else m.group(1)
            if kind in found:  # the last one silently won before
                raise UsageError(f"TARGETS entry {item!r}: two {kind} addresses; give one of each")
            if m.group(4):
                found["metrics"] = m.group(4)
            elif not 1 <= int(m.group(3)) <= 65535:
                raise UsageError(f"TARGETS entry {item!r}: port {m.group(3)} is outside 1..65535")
            else:
                found[m.group(1)] = (m.group(2).strip("[]"), int(m.group(3)))
        if "rest" not in found and "grpc" not in found:
            raise UsageError(f"TARGETS entry {item!r} has no rest:// or grpc:// address")
        # TF Serving serves its metrics on the REST port; with only a gRPC address, the port after it
        # (8500 -> 8501, TF Serving's own pairing) unless metrics= says otherwise.
        host, port = found["rest"] if "rest" in found else (found["grpc"][0], found["grpc"][1] + 1)
        rest = found.get("rest", (None, None))[1]
        metrics = found.get("metrics") or f"http://{_url_host(host)}:{port}/monitoring/prometheus/metrics"
        servers.append(Server(name, host, rest, found.get("grpc", (None, None))[1], metrics))
    if len({s.name for s in servers}) != len(servers) or not servers:
        raise UsageError(f"TARGETS must name each server once, got {text!r}")
    return servers


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
        for s in self.servers:
            for p in protocols:
                if not (s.rest if p == "rest" else s.grpc):
                    raise UsageError(f"TARGETS: {s.name} has no {p}:// address; add one or choose PROTOCOL="
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
                raise UsageError(f"TARGETS: {s.metrics_url} answers, but not with TF Serving's metrics page (no "
                                 f":tensorflow: family): is it {s.name}'s REST port? (or give metrics=URL)")
        self.check_prometheus()

    def check_prometheus(self) -> None:
        """PROMETHEUS answers the HTTP API in its shape: a known query, checked, before anything is
        measured (a typo pointing at the exporter once failed after the whole run)."""
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
            raise UsageError(f"PROMETHEUS: {self.prometheus_url} does not answer Prometheus' HTTP API "
                             "(/api/v1/query?query=vector(1) gave no [{\"value\": [t, \"1\"]}]): is it Prometheus?")

    def up(self, batching) -> None:
        """Nothing to bring up: they run as deployed."""

    def cold_start(self, server: Server, batching, first_request=None) -> None:
        """Not ours to restart: no cold start is timed (the report says so)."""
        return None

    def restart(self, server: Server, batching: bool = True, batching_file=None, model_path=None) -> None:
        raise UsageError(f"{server.name} runs elsewhere (TARGETS): it cannot be restarted from here")

    def resources(self, server: Server) -> None:
        """Not ours to inspect: their memory and CPU are whatever their Prometheus has."""
        return None

    def monitoring(self, sla_p99_ms: float) -> str:
        return self.prometheus_url

    def model_dir(self, server: Server) -> Path | None:
        """MODEL's newest version directory where it was given (None: not on this machine)."""
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

"""The docker runtime behind the Serving interface: each version's TF Serving container, made
from the same service definition as docker-compose.yml (image, flags, configs, healthcheck,
hardening; stack/compose.py), run through the docker API so a compare can recreate one with
batching on or off, another batching file or model base path, or a second server of one image
("2.21-b") on shifted ports.

    serving = DockerServing(registry, registry.select("2.12 2.21"))
    serving.up(batching=True)            # containers AVAILABLE, healthchecks running
    serving.cold_start(serving.servers[0], batching=True)
    serving.resources(serving.servers[0])   # memory (now, peak) and CPU of its cgroup

Containers are named <project>-bench-tfserving-<v> and labelled tfsb.project, so `make down`
removes them with the compose services. Prometheus and the exporter run on the host as in the
local runtime, scraping the published loopback ports; the exporter maps container processes to
versions through the tfsb.version label.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from core import ports
from stack import compose, knobs
from stack.docker_runtime import BENCH_LABEL, ROOT, DockerError, project
from stack.images import OFFLINE_PREFIX
from stack.promconfig import service
from stack.local_serving import LocalServing
from stack.serving import Server, first_predict_ms, local_server, newest_state
from core import settings

START_BUDGET_S = 300.0  # to AVAILABLE, after the container starts (a vfs engine copies the image first)


def _client():
    from stack.runtime import docker_client

    client = docker_client(timeout=120)
    if client is None:
        raise DockerError("no docker engine answers (docker info); start dockerd or use RUNTIME=local")
    return client


def image_for(version) -> str:
    """The image of a version's service, as compose resolves it: its IMAGE variable, else the official tag.
    An alias ("2.21-b", a knob variant "2.9-onednn0") runs its base version's image."""
    base = version.key
    return settings.image_override(compose.image_variable(base)) or version.image


def _network(client) -> str:
    """The compose project's default network (created as compose would, so `make up` adopts it):
    a dockerd started with --bridge=none has no default bridge to publish ports from."""
    import docker

    name = f"{project()}_default"
    try:
        client.networks.get(name)
    except docker.errors.NotFound:
        client.networks.create(name, driver="bridge", labels={"com.docker.compose.network": "default",
                                                               "com.docker.compose.project": project()})
    return name


def _nanos(text: str) -> int:
    return int(float(text.rstrip("s")) * 1e9)


class DockerServing:
    """Model servers of the docker runtime, one container per version."""

    kind = "docker"
    prometheus_url = None  # the stack's own

    def __init__(self, registry, versions: list, model_path: str | None = None, cpus: list | None = None,
                 log=print, startup_budget_s: float = START_BUDGET_S, model_for: dict | None = None):
        self.registry, self.versions, self.model_path, self.cpus, self.log = registry, versions, model_path, cpus, log
        self.model_for = dict(model_for or {})  # as LocalServing's
        self.startup_budget_s = startup_budget_s
        self.servers = [local_server(v) for v in versions]  # the same loopback ports as the local runtime
        self._by_name = {v.name: v for v in versions}
        self._client = _client()
        for v in versions:
            self._check_image(v)
        self.warnings = []
        if settings.gpu():
            from stack import gpu_compat

            caps = gpu_compat.gpu_capabilities()
            self.warnings = [w for w in (gpu_compat.check(v.key, caps) for v in versions) if w]
            if self.warnings:
                self.startup_budget_s *= gpu_compat.JIT_BUDGET_FACTOR
            for w in self.warnings:
                log(f"  warning: {w}")

    def _check_image(self, v) -> None:
        import docker

        ref = image_for(v)
        try:
            self._client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise DockerError(f"image {ref} of TF Serving {v.name} is not on this engine: `docker pull {ref}`, or "
                              f"build offline ones with `make images VERSIONS=\"{v.key}\"` and "
                              "run its export lines") from None

    def model_of(self, v) -> str | None:
        """The model base a version's container serves (None: the example model)."""
        return self.model_for.get(v.name, self.model_path)

    # ---- the container of one version ------------------------------------------------------
    def name(self, v) -> str:
        return f"{project()}-bench-{service(v.name)}"

    def _model_base(self, v, model_path) -> Path:
        from models.prepare import check_base_path, ensure_example_model

        base = check_base_path(model_path) if model_path else ensure_example_model(
            v, self.registry, log=lambda *_: None)  # an alias's export is its base version's (Version.key)
        for d in [base, *(p for p in base.iterdir() if p.is_dir())]:
            d.chmod(d.stat().st_mode | 0o755)  # the server in the container is another user
        return base

    def _spec(self, v, mode: dict) -> dict:
        """docker API arguments from compose's service definition, in this batching mode."""
        svc = compose.tfserving(v)
        flags = [f for f in svc["command"] if not f.startswith(("--enable_batching", "--batching_parameters_file"))]
        flags += knobs.flags(v.knobs)  # a knob variant: TF Serving's own thread flags
        volumes = {str(ROOT / "monitoring_configs"): {"bind": "/config", "mode": "ro"},
                   mode["model"]: {"bind": "/models/my_model", "mode": "ro"}}
        if mode["batching"]:
            flags.append("--enable_batching=true")
            if mode.get("batching_file"):
                volumes[mode["batching_file"]] = {"bind": "/bench/batching.config", "mode": "ro"}
                flags.append("--batching_parameters_file=/bench/batching.config")
            else:
                flags.append("--batching_parameters_file=/config/batching.config")
        hc = svc["healthcheck"]
        if knobs.allocator(v.knobs) in knobs.PRELOAD and not image_for(v).startswith(OFFLINE_PREFIX):
            raise DockerError(f"KNOBS malloc={knobs.allocator(v.knobs)}: {image_for(v)} has no Debian allocator "
                              "libraries to preload (a library mounted from this host would not match its glibc); "
                              "build the images with `make images` and export the lines it prints, or use "
                              "RUNTIME=local")
        return dict(
            image=image_for(v), name=self.name(v), entrypoint=svc["entrypoint"], command=flags,
            environment={**svc["environment"], **knobs.env(v.knobs)}, volumes=volumes, detach=True,
            labels={**svc["labels"], BENCH_LABEL: project(), "tfsb.mode": json.dumps(mode, sort_keys=True)},
            ports={f"{ports.TFSERVING_GRPC}/tcp": ("127.0.0.1", ports.grpc(v)),
                   f"{ports.TFSERVING_REST}/tcp": ("127.0.0.1", ports.rest(v))},
            healthcheck={"test": hc["test"], "interval": _nanos(hc["interval"]), "timeout": _nanos(hc["timeout"]),
                         "retries": hc["retries"], "start_period": _nanos(hc["start_period"])},
            cpuset_cpus=",".join(map(str, self.cpus)) if self.cpus else None,
            security_opt=svc["security_opt"], network=_network(self._client), restart_policy={"Name": "no"})

    def _mode(self, v, batching: bool, batching_file=None, model_path=None) -> dict:
        return {"batching": bool(batching), "batching_file": str(Path(batching_file).resolve()) if batching_file else "",
                "model": str(self._model_base(v, model_path or self.model_of(v)).resolve()), "cpus": self.cpus or [],
                "image": image_for(v)}

    def _existing(self, v):
        """This version's container, and any compose service container holding its ports."""
        mine = self._client.containers.list(all=True, filters={"name": f"^{self.name(v)}$"})
        theirs = self._client.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={project()}", f"com.docker.compose.service={service(v.name)}"]})
        return (mine[0] if mine else None), theirs

    def _start(self, v, mode: dict) -> float:
        """(Re)create the container in this mode; wait until the model is AVAILABLE. Seconds taken."""
        mine, theirs = self._existing(v)
        for c in theirs:
            self.log(f"  replacing compose's {c.name} (its ports); `make up` brings it back")
            c.remove(force=True)
        if mine is not None:
            mine.remove(force=True)
        t0 = time.perf_counter()
        container = self._client.containers.run(**self._spec(v, mode))
        self._wait_available(v, container, t0)
        return time.perf_counter() - t0

    def _wait_available(self, v, container, t0: float) -> None:
        deadline = t0 + self.startup_budget_s
        while time.perf_counter() < deadline:
            if newest_state(self._server(v)) == "AVAILABLE":
                return
            container.reload()
            if container.status in ("exited", "dead"):
                tail = container.logs(tail=3).decode(errors="replace").strip().splitlines()
                raise DockerError(f"TF Serving {v.name} ({container.name}) exited: {' / '.join(tail)[-300:]}")
            time.sleep(0.1)
        raise DockerError(f"TF Serving {v.name} ({container.name}) not AVAILABLE within {self.startup_budget_s:.0f}s "
                          f"(docker logs {container.name})")

    def _server(self, v) -> Server:
        return next(s for s in self.servers if s.name == v.name)

    def _running_mode(self, v) -> dict | None:
        mine, _ = self._existing(v)
        if mine is None or mine.status != "running":
            return None
        return json.loads(mine.labels.get("tfsb.mode", "null"))

    # ---- the Serving interface ---------------------------------------------------------------
    def check(self, protocols) -> None:
        """Containers started here: their ports are the registry's, and `up` waits until they answer."""

    def up(self, batching: bool, batching_file=None, model_path=None) -> None:
        """Every server running in this mode; recreated where it runs otherwise (or not at all)."""
        for v in self.versions:
            mode = self._mode(v, batching, batching_file, model_path)
            if self._running_mode(v) != mode or newest_state(self._server(v)) != "AVAILABLE":
                took = self._start(v, mode)
                self.log(f"  {self.name(v)}: AVAILABLE after {took:.1f}s (batching {'on' if batching else 'off'})")

    def restart(self, server: Server, batching: bool = True, batching_file=None, model_path=None) -> None:
        """Recreate one server's container in this mode (a sweep's next batching file, a hot update's base)."""
        v = self._by_name[server.name]
        self._start(v, self._mode(v, batching, batching_file, model_path))

    def cold_start(self, server: Server, batching: bool, first_request=None) -> dict:
        """Recreate the container; time container start -> AVAILABLE -> first successful predict."""
        v = self._by_name[server.name]
        mine, _ = self._existing(v)
        if mine is not None:
            mine.remove(force=True)
        spec = self._spec(v, self._mode(v, batching))
        t0 = time.perf_counter()
        container = self._client.containers.create(**{k: x for k, x in spec.items() if k != "detach"})
        created = time.perf_counter()
        container.start()
        started = time.perf_counter()
        self._wait_available(v, container, started)
        t_avail = time.perf_counter()
        first = first_predict_ms(server, request=first_request(server) if first_request else None)
        peak = (self.resources(server) or {}).get("memory_peak_bytes")  # the cgroup's, where the engine reports it
        return {"to_available_s": t_avail - started, "first_request_ms": first,
                "to_first_predict_s": time.perf_counter() - started, "container_create_s": created - t0,
                "peak_rss_bytes": peak}

    def monitoring(self, sla_p99_ms: float) -> str:
        """The host's exporter and Prometheus (the local runtime's, same configs) scraping the
        published ports of these servers."""
        from stack import monitoring

        monitoring.up_exporter(log=lambda *_: None)
        return monitoring.up_prometheus(self.registry, sla_p99_ms=sla_p99_ms, log=lambda *_: None,
                                        versions=self.versions)

    def model_dir(self, server: Server):
        """As LocalServing's (the host's copy of what the container mounts)."""
        v = self._by_name[server.name]
        return LocalServing(self.registry, [v], self.model_of(v), log=lambda *_: None).model_dir(server)

    def server_path(self, server: Server, host_path: Path) -> None:
        """A container reads only the model base mounted at /models/my_model: nothing else of this machine."""
        return None

    def ceiling_command(self, server: Server) -> tuple:
        """TensorFlow in-process runs in the version's local venv on the host: the pip build of its
        release, not TF Serving's own (the report says so)."""
        v = self._by_name[server.name]
        local = LocalServing(self.registry, [v], self.model_of(v), log=lambda *_: None)
        return local.ceiling_command(server)

    def resources(self, server: Server) -> dict | None:
        """The container's memory now and at its peak, and CPU seconds so far, from its cgroup
        (docker's stats; the peak where the engine reports one: cgroup v1's max_usage)."""
        mine, _ = self._existing(self._by_name[server.name])
        if mine is None:
            return None
        st = mine.stats(stream=False, one_shot=True)
        mem, cpu = st.get("memory_stats") or {}, (st.get("cpu_stats") or {}).get("cpu_usage") or {}
        cache = (mem.get("stats") or {}).get("total_inactive_file", (mem.get("stats") or {}).get("inactive_file", 0))
        return {"memory_bytes": mem.get("usage", 0) - cache if mem.get("usage") else None,
                "memory_peak_bytes": mem.get("max_usage"), "cpu_s": cpu.get("total_usage", 0) / 1e9,
                "container": mine.name, "image": mine.attrs["Config"]["Image"]}

    def down(self) -> None:
        for v in self.versions:
            mine, _ = self._existing(v)
            if mine is not None:
                mine.remove(force=True)

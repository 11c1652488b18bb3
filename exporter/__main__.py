"""python -m exporter --port 9400: GPU, per-version process and CPU-fallback metrics on /metrics.

Needs, in a container: `pid: host` (to see the model servers' processes), the
NVIDIA runtime (for NVML), and optionally the docker socket mounted read-only
(to map containers to versions); on Kubernetes, hostPID and a Role to list the pods of
its namespace (to map pods to versions). Without a GPU it still serves the CPU fallback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from pathlib import Path

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from exporter.attribution import Attributor
from exporter.collectors import CpuFallbackCollector, GpuCollector, Health, SelfCollector
from exporter.nvml_source import NvmlSource
from exporter.sampler import Sampler

ROOT = Path(__file__).resolve().parent.parent


def docker_client(mode: str):
    """The docker SDK client when asked for (or, on auto, when the socket is there), else None."""
    if mode == "off" or (mode == "auto" and not os.access("/var/run/docker.sock", os.R_OK)):
        return None
    try:
        import docker
        return docker.from_env(timeout=3)
    except Exception as e:  # no engine: attribution falls back to pid files and command lines
        print(f"exporter: docker attribution off: {e}", file=sys.stderr)
        return None


def build_registry(nvml, state_dir, proc_root="/proc", docker=None, interval_s=0.1, pods=None):
    health = Health()
    source = NvmlSource(nvml, health.error)
    sampler = Sampler(source, interval_s).start()
    if pods is not None:
        pods.on_error = health.error
    attributor = Attributor(state_dir, proc_root, docker, pods=pods)
    registry = CollectorRegistry(auto_describe=False)
    for c in (GpuCollector(sampler, source, attributor, health), CpuFallbackCollector(attributor, health),
              SelfCollector(health)):
        registry.register(c)
    return registry, sampler


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m exporter", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=9400)
    p.add_argument("--bind", default=os.environ.get("BIND", "127.0.0.1"))
    p.add_argument("--sample-interval", type=float, default=0.1, help="NVML sampling period in seconds (peaks)")
    p.add_argument("--state-dir", default=str(ROOT / ".state" / "local"), help="local runtime pid files")
    p.add_argument("--proc-root", default="/proc")
    p.add_argument("--docker", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--kube", choices=["auto", "on", "off"], default="auto",
                   help="attribute by pod labels (auto: inside a Kubernetes pod; needs NODE_NAME)")
    p.add_argument("--kube-api", default="", help="API server URL instead of the in-cluster one (kubectl proxy)")
    p.add_argument("--nvml-module", default="pynvml", help="module with pynvml's API (tests inject a fake)")
    args = p.parse_args(argv)
    if not 0 < args.sample_interval <= 60:  # nan fails this too
        p.error("--sample-interval must be > 0 and at most 60 (seconds)")
    if not 0 <= args.port < 65536:
        p.error("--port must be 0..65535")
    try:
        nvml = importlib.import_module(args.nvml_module)
    except ImportError as e:
        print(f"exporter: error: cannot import NVML module {args.nvml_module!r}: {e}", file=sys.stderr)
        return 2
    from exporter import kube

    registry, sampler = build_registry(nvml, args.state_dir, args.proc_root, docker_client(args.docker),
                                       args.sample_interval, kube.from_env(args.kube, args.kube_api or None))
    try:
        server, thread = start_http_server(args.port, addr=args.bind, registry=registry)
    except OSError as e:
        print(f"exporter: error: cannot listen on {args.bind}:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"exporter: serving http://{args.bind}:{args.port}/metrics", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make up/down/status` and friends: python -m stack <command>.

    python -m stack up --versions "2.9 2.21"     # local runtime when no docker engine answers
    python -m stack status
    python -m stack down
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from loadgen.argtypes import OneLineParser, number
from loadgen.scenario import MAX_DURATION_S
from loadgen.schedule import MAX_RATE
from stack.k8s import MAX_SHARDS
from core.registry import load_registry
from stack.runtime import pick_runtime
from core.venvs import ensure_venv
from core.errors import Failed, UsageError
from core.errors import run_main
from fileio.atomic import WriteError
from fileio.http import ReadError
from core import settings


def _versions_arg(args) -> str:
    return args.versions or os.environ.get("VERSIONS") or os.environ.get("VERSION") or "2.9"


def _sla_from_env() -> float | None:
    """SLA_P99_MS, the alert rules' P99 bound: a finite number of milliseconds > 0, or unset."""
    text = os.environ.get("SLA_P99_MS", "")
    if not text:
        return None
    try:
        return number(0, 3_600_000, lo_open=True)(text)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"SLA_P99_MS: {e}") from None


def cmd_up(args, reg) -> int:
    from core import ports
    from stack import local, procs

    runtime = pick_runtime(args.runtime)
    versions = reg.select(_versions_arg(args))
    ports.check_all(versions)  # a bad TFSB_PORT_OFFSET fails here, before anything is started or written
    _sla_from_env()  # so does a bad SLA_P99_MS
    print(f"runtime: {runtime}")
    if runtime == "docker":
        return _up_docker(args, reg, versions)
    if not shutil.which("prometheus"):  # before any server starts, not after
        raise UsageError("the prometheus binary is missing: `make setup` installs Debian's prometheus package "
                           "(elsewhere: https://prometheus.io/download/, put `prometheus` on PATH)")
    with procs.state_lock(local.state_dir(), "make up"):
        return _up_local(args, reg, versions)


def _up_local(args, reg, versions) -> int:
    from stack import dashboards, local, monitoring
    from core.placement import isolate_from_env, plan

    place = plan(None, isolate_from_env())
    if place.isolated:
        print(f"  placement: model servers on cores {place.servers}, load generator on {place.client} (ISOLATE=0: off)")
    for v in versions:
        info = local.up_version(v, reg, model_path=args.model or None, model_name=args.model_name,
                                batching=not args.no_batching, bind=args.bind,
                                cpus=place.servers if place.isolated else None)
        print(f"  TF Serving {v.name}: REST http://127.0.0.1:{info['rest']}/v1/models/{args.model_name}  "
              f"gRPC 127.0.0.1:{info['grpc']}  metrics http://127.0.0.1:{info['rest']}/monitoring/prometheus/metrics")
    exporter = monitoring.up_exporter(args.bind)
    sla = _sla_from_env()
    prom = monitoring.up_prometheus(reg, args.bind, sla)
    running = [v.name for v in monitoring.running_versions(reg)]
    print(f"  exporter: {exporter}\n  Prometheus: {prom}  (alerts: {prom}/alerts)")
    if not running:
        raise Failed("no model server is running after `up`: see the logs under "
                           f"{local.state_dir()}/tf<version>/modelserver.log")
    print("  no Grafana in the local runtime: each comparison panel in Prometheus' graph page:")
    for title, legend, expr in dashboards.panel_queries(dashboards.load("compare.json")):
        q = dashboards.substitute(expr, running, running[0], "1m")
        name = title.replace("$version", legend) if "$version" in title else title
        print(f"    {name}: {dashboards.graph_link(prom, q)}")
    print("  live terminal view: make watch;  load: make load VERSION=... RATE=...;  stop: make down")
    _preflight(versions, not args.no_batching, args.model_name)
    return 0


def _preflight(versions, batching: bool, model_name: str = "my_model") -> None:
    """`make up`'s preflight: one predict each (families TF Serving creates on first use), then each
    metric the rules, panels and compare read; differences are printed, never fatal here."""
    from stack import preflight
    from stack.serving import first_predict_ms, local_server

    if model_name != "my_model":
        print("  preflight: skipped (another model than the example; `make doctor` checks what is there)")
        return
    for v in versions:
        s = local_server(v)
        try:
            first_predict_ms(s, timeout=10)
        except OSError as e:
            print(f"  preflight: {v.name} does not answer a predict ({getattr(e, 'reason', e)})")
            continue
        lines = preflight.check(s, batching)
        print("\n".join(f"  preflight: {ln}" for ln in lines) if lines else f"  preflight {v.name}: metrics as expected")


def _up_docker(args, reg, versions) -> int:
    from core import ports
    from stack import docker_runtime

    if args.model or args.no_batching or args.bind != "127.0.0.1":
        print("  note: --model, --no-batching and BIND are local-runtime options; docker-compose.yml sets "
              "these (BIND= is read by compose itself)")
    done = docker_runtime.up(versions, reg, without=tuple(args.without))
    for name in done["versions"]:
        v = reg.get(name)
        print(f"  TF Serving {name}: REST http://127.0.0.1:{ports.rest(v)}/v1/models/my_model  "
              f"gRPC 127.0.0.1:{ports.grpc(v)}")
    print(f"  Prometheus: http://127.0.0.1:{ports.port(ports.PROMETHEUS)}  "
          f"exporter: http://127.0.0.1:{ports.port(ports.EXPORTER)}/metrics")
    if "grafana" in done["services"]:
        print(f"  Grafana: http://127.0.0.1:{ports.port(ports.GRAFANA)}  (user admin, password in .env)  "
              "dashboard: TF Serving version comparison")
    _preflight(versions, True)
    return 0


def cmd_down(args, reg) -> int:
    from stack import docker_runtime, local
    from stack.runtime import docker_available

    from stack import procs

    with procs.state_lock(local.state_dir(), "make down"):
        n = local.down()
    print(f"stopped {n} process(es)" if n else "nothing was running in the local runtime")
    if docker_available():
        from stack.docker_runtime import remove_all

        m = remove_all()
        if m:
            print(f"removed {m} container(s) of compares and scenarios")
    if docker_runtime.targeted_versions() or (args.volumes and docker_available()):
        docker_runtime.down(volumes=args.volumes)
        print("docker compose: stopped" + (", volumes removed" if args.volumes else
                                           " (volumes kept; make clean removes them)"))
    return 0


def cmd_status(args, reg) -> int:
    from core import ports
    from stack import docker_runtime, local
    from stack.targets import scrape_health

    ports.check_all(reg.versions.values())
    rows = local.status(reg)
    if docker_runtime.targeted_versions():
        for svc, state in docker_runtime.status():
            running = state.startswith("running")
            rows.append({"component": svc, "running": running and "unhealthy" not in state, "pid": None,
                         "state": state.replace("running ", "") or "-", "url": "docker"})
    if not rows:
        print("nothing is up (make up VERSION=2.9)")
        return 0
    for r in rows:
        print(f"{r['component']:<22} {'up' if r['running'] else 'DOWN':<5} pid {r['pid'] or '-':<8} "
              f"{r['state']:<10} {r['url']}")
    health = scrape_health(f"http://127.0.0.1:{ports.port(ports.PROMETHEUS)}")
    if health:
        print("Prometheus scrape targets (up):")
        for job, instance, version, up in health:
            if job == "loadgen" and not up:
                continue  # the load generator is only up while a run goes on
            print(f"  {job:<10} {instance:<22} {version:<6} {'up' if up else 'DOWN'}")
    down = [r for r in rows if not r["running"]] + [h for h in health if not h[3] and h[0] != "loadgen"]
    return 1 if down else 0


def cmd_watch(args, reg) -> int:
    from stack.watch import watch

    return watch(reg, once=args.once, interval_s=args.interval, duration_s=args.duration)


def cmd_promconfig(args, reg) -> int:
    from stack import promconfig

    print(promconfig.render(promconfig.generate(list(reg.versions.values()), args.runtime)), end="")
    return 0


def cmd_dashboards(args, reg) -> int:
    from stack import dashboards

    for path in dashboards.write():
        print(path)
    return 0


def cmd_compose(args, reg) -> int:
    from stack import compose

    for path in compose.write(list(reg.versions.values())):
        print(path)
    return 0


def cmd_k8s(args, reg) -> int:
    from stack import k8s

    o = k8s.Options(gpu=args.gpu, model_base_path=args.model_base_path, cpu=args.cpu, memory=args.memory,
                    shards=args.shards, rate=args.rate, duration_s=args.duration, protocol=args.protocol,
                    release=args.release)
    paths = k8s.write(reg.select(args.versions), o, Path(args.out))
    print(f"wrote {len(paths)} files under {args.out}: kubectl apply --server-side -k {args.out}; "
          f"kubectl create -k {args.out}/loadgen (see docs/kubernetes.md)")
    return 0


def cmd_images(args, reg) -> int:
    from stack import images

    from stack.compose import image_variable

    base = images.build_base()
    names = [v.name for v in reg.select(args.versions)] if args.versions else [reg.newest.name]
    built = {n: images.build_tfserving(n) for n in names}
    # One line per version's service, then the rest: `eval "$(make -s images ...)"` sets them all.
    for n, tag in built.items():
        print(f"export {image_variable(n)}={tag}")
    print(f"export PROMETHEUS_IMAGE={base} EXPORTER_IMAGE={base} LOADGEN_IMAGE={built[names[-1]]}")
    return 0


def cmd_doctor(args, reg) -> int:
    """The preflight on servers already up: the registry's versions at their ports (local or docker
    runtime), or TARGETS. Exit 1 when anything differs, 3 when a server does not answer."""
    from stack import preflight
    from stack.external import parse_targets
    from stack.serving import first_predict_ms, local_server

    servers = parse_targets(args.targets) if args.targets else [local_server(v) for v in reg.select(_versions_arg(args))]
    batching = None if args.targets else not args.no_batching
    problems, down = [], 0
    for s in servers:
        if not args.targets:
            try:
                first_predict_ms(s, timeout=10)  # TF Serving creates most families on first use
            except OSError as e:
                print(f"{s.name}: does not answer a predict at {s.host}:{s.rest} ({getattr(e, 'reason', e)}); "
                      "is it up (make up)?")
                down += 1
                continue
        try:
            text = preflight.read_page(s)
        except OSError as e:  # nothing to check: a server that does not answer (3), not a difference (1)
            print(preflight.unanswered(s, e))
            down += 1
            continue
        lines = preflight.check_text(s, text, batching)
        problems += lines
        print("\n".join(lines) if lines else f"{s.name}: every metric the rules, panels and compare read is there")
    return 3 if down else (1 if problems else 0)


def cmd_venv(args, reg) -> int:
    for v in reg.select(_versions_arg(args)):
        print(ensure_venv(v, reg, gpu=args.gpu))
    return 0


def cmd_demo(args, reg) -> int:
    from stack.demo import run_demo

    return run_demo(reg, args.versions or settings.DEFAULT_VERSIONS)


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m stack", description="bring the benchmark stack up and down")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start model servers (and, where built, the monitoring stack)")
    up.add_argument("--versions", default="", help='e.g. "2.6 2.9 2.12" (default: $VERSIONS, $VERSION, 2.9)')
    up.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
    up.add_argument("--model", default=os.environ.get("MODEL", ""), help="a SavedModel base path instead of the example")
    up.add_argument("--model-name", default=os.environ.get("MODEL_NAME", "my_model"))
    up.add_argument("--no-batching", action="store_true")
    up.add_argument("--bind", default=os.environ.get("BIND", "127.0.0.1"))
    up.add_argument("--without", nargs="*", default=[], choices=["grafana", "exporter", "prometheus"],
                    help="docker runtime: leave these services out")
    dn = sub.add_parser("down", help="stop what `up` started (keeps Prometheus data)")
    dn.add_argument("--volumes", action="store_true", help="docker runtime: remove the named volumes too")
    sub.add_parser("status", help="what runs, and whether each server answers")
    demo = sub.add_parser("demo", help="the embedded default end to end on two versions")
    demo.add_argument("--versions", default=settings.DEFAULT_VERSIONS)
    w = sub.add_parser("watch", help="a live terminal view of the comparison panels")
    w.add_argument("--once", action="store_true")
    w.add_argument("--interval", type=number(0.1, 3600), default=3.0)
    w.add_argument("--duration", type=number(0, MAX_DURATION_S, lo_open=True), default=3600.0, help="stop after this many seconds")
    pc = sub.add_parser("promconfig", help="print prometheus.yml for all versions")
    pc.add_argument("--runtime", choices=["local", "docker"], default="docker")
    sub.add_parser("dashboards", help="regenerate grafana/dashboards/*.json")
    sub.add_parser("compose", help="regenerate docker-compose.yml and docker-compose.gpu.yml")
    k = sub.add_parser("k8s", help="write the Kubernetes manifests (a kustomize tree)")
    k.add_argument("--versions", default=os.environ.get("VERSIONS") or settings.DEFAULT_VERSIONS)
    k.add_argument("--gpu", action="store_true", default=settings.gpu(),
                   help="-gpu images, a GPU per server, servers and exporter on GPU nodes (GPU=1)")
    k.add_argument("--out", default=os.environ.get("OUT") or "deploy/k8s/generated")
    k.add_argument("--model-base-path", default=os.environ.get("MODEL_BASE_PATH", ""),
                   help="gs:// s3:// or hdfs:// URI TF Serving reads (default: the models PVC)")
    k.add_argument("--cpu", default=os.environ.get("CPU", "4"), help="per server, requests = limits")
    k.add_argument("--memory", default=os.environ.get("MEMORY", "8Gi"), help="per server, requests = limits")
    k.add_argument("--shards", type=number(1, MAX_SHARDS, integer=True, name="SHARDS"), default=os.environ.get("SHARDS") or "3", help="load generator pods")
    k.add_argument("--rate", type=number(0, MAX_RATE, lo_open=True, name="RATE"), default=os.environ.get("RATE") or "1000", help="total req/s")
    k.add_argument("--duration", type=number(1, MAX_DURATION_S, integer=True, name="DURATION_S"), default=os.environ.get("DURATION_S") or "300", help="load generator seconds")
    k.add_argument("--protocol", default="grpc", choices=["rest", "grpc"])
    k.add_argument("--release", default=os.environ.get("RELEASE", "kube-prometheus-stack"),
                   help="the kube-prometheus-stack Helm release selecting monitors and rules")
    im = sub.add_parser("images", help="build the compose file's images from local parts (no registry)")
    im.add_argument("--versions", default=os.environ.get("VERSIONS", ""),
                    help='TF versions of the model-server images, e.g. "2.12 2.21" (default: the newest)')
    doc = sub.add_parser("doctor", help="the preflight: each server's metrics as the rules, panels and compare read them")
    doc.add_argument("--versions", default="")
    doc.add_argument("--targets", default=os.environ.get("TARGETS", ""))
    doc.add_argument("--no-batching", action="store_true", help="the servers run without batching")
    venv = sub.add_parser("venv", help="create (or reuse) the venvs of versions")
    venv.add_argument("--versions", default="")
    venv.add_argument("--gpu", action="store_true")
    args = p.parse_args(argv)
    commands = {"up": cmd_up, "down": cmd_down, "status": cmd_status, "venv": cmd_venv, "demo": cmd_demo,
                "watch": cmd_watch, "promconfig": cmd_promconfig, "dashboards": cmd_dashboards, "compose": cmd_compose,
                "images": cmd_images, "doctor": cmd_doctor, "k8s": cmd_k8s}
    return run_main(lambda: commands[args.cmd](args, load_registry()), boundary=(ReadError, WriteError))


if __name__ == "__main__":
    sys.exit(main())

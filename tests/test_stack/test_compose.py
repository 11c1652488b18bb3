"""The docker runtime: docker-compose.yml as generated and committed, its security defaults, and
the compose path run for real, offline, with images built here from local parts (debootstrap
rootfs + the drop-in model server + TF 2.21 from pip; Debian's prometheus; the exporter).

No registry is reachable here, so every official image is replaced through its IMAGE
variable; Grafana has no local image and is left out of the live test only (--without
grafana). If no docker engine can be started the live test fails, it does not skip."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from core import ports
from stack import compose, docker_runtime, promconfig
from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "tfsbtest"
PROMETHEUS = f"http://127.0.0.1:{ports.port(ports.PROMETHEUS)}"  # after the suite's port offset (conftest.py)


def test_committed_files_are_generated_from_the_registry():
    reg = load_registry()
    versions = list(reg.versions.values())
    assert yaml.safe_load((ROOT / "docker-compose.yml").read_text()) == compose.generate(versions), \
        "docker-compose.yml is stale: python -m stack compose"
    assert yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text()) == compose.generate_gpu(versions)
    assert yaml.safe_load((ROOT / "prometheus/prometheus.yml").read_text()) == \
        json.loads(json.dumps(promconfig.generate(versions, "docker"))), "prometheus.yml is stale"


def test_compose_file_contract_and_security_defaults():
    reg = load_registry()
    cfg = compose.generate(list(reg.versions.values()))
    services = cfg["services"]
    published, offset_env = set(), ports.compose_env(reg.versions.values())
    for name, svc in services.items():
        for p in svc.get("ports", []):
            assert p.startswith("${BIND:-127.0.0.1}:"), f"{name} publishes {p} beyond loopback by default"
            # the host port follows TFSB_PORT_OFFSET (the suite's own, here) through its compose variable
            var, default = re.fullmatch(r"\$\{BIND:-127\.0\.0\.1\}:\$\{(\w+):-(\d+)\}:\d+", p).groups()
            assert var == ports.host_variable(int(default)), p
            assert offset_env[var] == str(int(default) + int(os.environ["TFSB_PORT_OFFSET"])), (p, offset_env[var])
            published.add(default)
        assert "no-new-privileges:true" in svc["security_opt"], name
        for vol in svc.get("volumes", []):
            if "docker.sock" in vol:
                assert vol.endswith(":ro"), f"{name} mounts the docker socket read-write"
    assert len(published) == sum(len(s.get("ports", [])) for s in services.values()), "a host port used twice"
    for v in reg.versions.values():
        svc = services[promconfig.service(v.name)]
        assert svc["image"] == f"${{{compose.image_variable(v.name)}:-{v.image}}}" and v.name in svc["profiles"]
        assert {"--enable_batching=true", "--monitoring_config_file=/config/monitoring.config",
                "--batching_parameters_file=/config/batching.config"} <= set(svc["command"])
        assert svc["environment"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
        assert "./monitoring_configs:/config:ro" in svc["volumes"] and "AVAILABLE" in svc["healthcheck"]["test"][-1]
    for own in ("exporter", "loadgen", "prometheus"):
        assert services[own]["read_only"] is True, own
    graf = services["grafana"]["environment"]
    assert graf["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert graf["GF_AUTH_ANONYMOUS_ENABLED"] == "${GRAFANA_ANONYMOUS:-false}"
    gpu = compose.generate_gpu(list(reg.versions.values()))["services"]
    assert gpu["tfserving-2-9"]["image"].endswith("-gpu}")
    assert gpu["exporter"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def test_env_file_is_generated_once_and_private(tmp_path):
    env = tmp_path / ".env"
    docker_runtime.ensure_env_file(env)
    first = env.read_text()
    password = dict(ln.split("=", 1) for ln in first.splitlines() if "=" in ln)["GRAFANA_ADMIN_PASSWORD"]
    assert len(password) >= 20 and password != "admin"
    assert env.stat().st_mode & 0o777 == 0o600
    env.chmod(0o644)
    docker_runtime.ensure_env_file(env)
    assert env.read_text() == first and env.stat().st_mode & 0o777 == 0o600


# ---- live, offline --------------------------------------------------------------------------

def stack(env, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "stack", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def stack_up(offline_images, tmp_path_factory):
    v = load_registry().newest
    env = dict(os.environ, COMPOSE_PROJECT_NAME=PROJECT, **offline_images["env"], PYTHONPATH=str(ROOT),
               TFSB_STATE=str(tmp_path_factory.mktemp("compose")))
    warnings.warn("Grafana has no local image on this machine (no registry): the live compose test leaves "
                  "it out (--without grafana); its provisioning and dashboards are tested against Prometheus")
    up = stack(env, "up", "--runtime", "docker", "--versions", v.name, "--without", "grafana")
    yield {"env": env, "up": up, "version": v}
    stack(env, "down")
    subprocess.run(["docker", "volume", "rm", "-f", f"{PROJECT}_prometheus-data", f"{PROJECT}_grafana-data"],
                   capture_output=True)


def _containers() -> list:
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
                          capture_output=True, text=True).stdout.split()


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _prom(query: str):
    q = urllib.parse.urlencode({"query": query})
    return _get(f"{PROMETHEUS}/api/v1/query?{q}")["data"]["result"]


@pytest.mark.integration
def test_compose_up_serves_scrapes_and_alerts_offline(stack_up):
    up, v = stack_up["up"], stack_up["version"]
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"TF Serving {v.name}: REST http://127.0.0.1:{ports.rest(v)}" in up.stdout
    x = np.random.RandomState(5).rand(4, 784).tolist()

    def predict():
        req = urllib.request.Request(f"http://127.0.0.1:{ports.rest(v)}/v1/models/my_model:predict",
                                     data=json.dumps({"instances": x}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())["predictions"]
    preds = predict()
    assert np.allclose(np.sum(preds, axis=1), 1.0, atol=1e-4) and np.shape(preds) == (4, 10)

    def rate():
        return sum(float(r["value"][1]) for r in _prom("version:tfserving_requests:rate1m"))
    deadline, found = time.monotonic() + 90, {}
    while time.monotonic() < deadline:  # bounded: 90 s of 10 requests a round
        for _ in range(10):
            predict()
        found = {(r["metric"]["job"], r["metric"].get("version", "")): r["value"][1] for r in _prom("up")}
        if found.get(("tfserving", v.name)) == "1" and rate() > 0 \
                and _prom("process_resident_memory_by_version_bytes"):
            break
        time.sleep(1)
    assert found.get(("tfserving", v.name)) == "1" and found.get(("exporter", "")) == "1", found
    rate = _prom("version:tfserving_requests:rate1m")  # a recording rule: rules are loaded
    assert rate and rate[0]["metric"]["version"] == v.name and float(rate[0]["value"][1]) > 0
    # The exporter (pid: host) attributes the container's process to its version via the docker labels;
    # it sees the host's other labelled model servers too, when some run beside this test.
    rss = _prom(f'process_resident_memory_bytes{{job="exporter",container!="",version="{v.name}"}}')
    assert len(rss) == 1 and float(rss[0]["value"][1]) > 50e6, rss
    rules = _get(f"{PROMETHEUS}/api/v1/rules")["data"]["groups"]
    assert any(r["name"] == "ModelServerDown" for g in rules for r in g["rules"])


@pytest.mark.integration
def test_compose_ports_bind_loopback_and_containers_are_hardened(stack_up):
    ids = _containers()
    assert len(ids) == 3, ids  # one model server, Prometheus, exporter
    for cid in ids:
        info = json.loads(subprocess.run(["docker", "inspect", cid], capture_output=True, text=True).stdout)[0]
        name = info["Name"]
        for binding in (b for bs in info["HostConfig"]["PortBindings"].values() for b in bs):
            assert binding["HostIp"] == "127.0.0.1", (name, binding)
        assert "no-new-privileges:true" in info["HostConfig"]["SecurityOpt"], name
        assert info["Config"]["User"] not in ("", "0", "root"), f"{name} runs as root"
        if "exporter" in name or "prometheus" in name:
            assert info["HostConfig"]["ReadonlyRootfs"], name


@pytest.mark.integration
def test_status_then_down_stops_every_container_and_keeps_the_tsdb(stack_up):
    env = stack_up["env"]
    st = stack(env, "status")
    assert st.returncode == 0, st.stdout + st.stderr
    for svc in (promconfig.service(stack_up["version"].name), "prometheus", "exporter"):
        assert any(line.startswith(svc) and " up " in line for line in st.stdout.splitlines()), st.stdout
    down = stack(env, "down")
    assert down.returncode == 0, down.stderr
    assert _containers() == []
    vols = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True).stdout.split()
    assert f"{PROJECT}_prometheus-data" in vols
    targets = Path(env["TFSB_STATE"]) / "docker" / "targets" / "tfserving.json"
    assert json.loads(targets.read_text()) == []

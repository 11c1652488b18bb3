"""`make up` in the local runtime, for real: two TF versions, the exporter (fake NVML at the
hardware boundary, so the GPU panels have data), Prometheus; the load generator drives both
versions; every dashboard query returns data; the printed graph links render in Chromium;
`make down` stops exactly what was started."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from servers import TEST_VERSIONS

from modelserver.metrics import HISTOGRAM_BATCH_SIZE_FROM, tf_release
from stack import dashboards
from stack.procs import alive
from stack.targets import query

ROOT = Path(__file__).resolve().parents[2]
OFFSET = 9000
PROM = f"http://127.0.0.1:{9090 + OFFSET}"

pytestmark = pytest.mark.integration


def stack(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "stack", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    env = dict(os.environ, TFSB_PORT_OFFSET=str(OFFSET), TFSB_STATE=str(tmp / "state"),
               TFSB_NVML_MODULE="fake_nvml", TFSB_PYTHONPATH=str(ROOT / "tests"),
               FAKE_NVML_STATE=str(tmp / "nvml.json"), PYTHONPATH=str(ROOT))
    (tmp / "nvml.json").write_text(json.dumps({"devices": []}))
    up = stack(env, "up", "--versions", " ".join(TEST_VERSIONS), "--runtime", "local")
    assert up.returncode == 0, up.stdout + up.stderr
    pids = {v: int((tmp / "state" / "local" / f"tf{v}" / "modelserver.pid").read_text().split()[0]) for v in TEST_VERSIONS}
    gib = 2 ** 30
    (tmp / "nvml.json").write_text(json.dumps({"devices": [{
        "name": "NVIDIA H200", "uuid": "GPU-fake-0", "used": 6 * gib, "total": 141 * gib, "reserved": None,
        "util": [35, 12], "power_mw": 250000, "energy_mj": 10 ** 8, "temp": 45, "clocks_mhz": [1980, 2619],
        "processes": [[pids[v], (i + 1) * gib] for i, v in enumerate(TEST_VERSIONS)]}]}))
    load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--versions", " ".join(TEST_VERSIONS),
                             "--concurrency", "4", "--duration", "40s", "--warmup", "2s", "--quiet",
                             "--metrics-port", str(9464 + OFFSET), "--out", str(tmp / "load.json")],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(20)  # enough scrapes (2 s) for the rate windows
    yield {"env": env, "up": up.stdout, "tmp": tmp, "pids": pids, "load": load}
    load.terminate()
    load.wait(30)
    stack(env, "down")


@pytest.mark.parametrize("board", ["compare.json", "version.json", "gpu.json"])
def test_every_dashboard_query_returns_data(running, board):
    dash = dashboards.load(board)
    empty, unexpected = [], []
    for title, legend, expr in dashboards.panel_queries(dash):
        for v in (TEST_VERSIONS if "$version\"" in expr and "=~" not in expr else TEST_VERSIONS[:1]):
            q = dashboards.substitute(expr, [v] if v != TEST_VERSIONS[0] else list(TEST_VERSIONS),
                                      TEST_VERSIONS[0], "20s")
            # TF Serving before 2.10 exports processed_batch_size as one scalar (no _sum/_count): the panel's
            # "rows per batch" is documented n/a there, and must stay empty like the real server's.
            na = "processed_batch_size_sum" in expr and "$version\"" in expr \
                and tf_release(v) < HISTOGRAM_BATCH_SIZE_FROM
            has = bool(query(PROM, q))
            if na and has:
                unexpected.append(f"{title} [{legend}]: {q}")
            elif not na and not has:
                empty.append(f"{title} [{legend}]: {q}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert not unexpected, "data where TF Serving < 2.10 has none:\n" + "\n".join(unexpected)


def test_status_and_watch_show_both_versions(running):
    st = stack(running["env"], "status")
    assert st.returncode == 0, st.stdout + st.stderr
    for v in TEST_VERSIONS:
        assert re.search(rf"modelserver {re.escape(v)}\s+up", st.stdout)
        assert re.search(rf"tfserving\s+\S+\s+{re.escape(v)}\s+up", st.stdout)
    assert re.search(r"exporter\s+up", st.stdout) and re.search(r"prometheus\s+up", st.stdout)
    w = stack(running["env"], "watch", "--once")
    assert w.returncode == 0, w.stdout + w.stderr
    for v in TEST_VERSIONS:
        row = next(line for line in w.stdout.splitlines() if re.match(rf"\W*{re.escape(v)}\s", line))
        assert re.search(r"\d+\.\d+/s", row) and " ms" in row and "MiB" in row, row


def test_graph_links_render_in_chromium(running, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "chromium missing: `make setup` installs Debian's chromium"
    links = re.findall(r"(?m)^\s+(QPS \(client side\)|Memory \(process RSS\)): (http\S+)$", running["up"])
    assert len(links) == 2, running["up"]
    for title, link in links:
        assert link.startswith(PROM + "/graph?")
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking", "--disable-component-update",
                              "--disable-sync", f"--user-data-dir={tmp_path / title[:3]}",
                              "--virtual-time-budget=15000", "--dump-dom", link],
                             capture_output=True, text=True, timeout=120).stdout
        for v in TEST_VERSIONS:
            assert f'version="{v}"' in dom, f"{title}: the graph shows no series of {v}"


def _loopback(ip: str) -> bool:
    """127.0.0.1, or the same seen through an IPv6 socket (gRPC binds ::ffff:127.0.0.1)."""
    import ipaddress

    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback


def test_every_listener_of_the_stack_binds_loopback_by_default(running):
    """SECURITY.md: nothing `make up` (or the load generator) starts listens beyond 127.0.0.1."""
    import psutil

    pids = [int(p.read_text().split()[0]) for p in (running["tmp"] / "state" / "local").glob("*/*.pid")]
    pids.append(running["load"].pid)
    assert len(pids) == len(TEST_VERSIONS) + 3, pids  # model servers, exporter, Prometheus, loadgen
    listening = {}
    for pid in pids:
        proc = psutil.Process(pid)
        for c in proc.net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN:
                listening[(proc.name(), c.laddr.port)] = c.laddr.ip
    assert len(listening) >= 2 * len(TEST_VERSIONS) + 3  # REST + gRPC per version, and the others
    exposed = {k: ip for k, ip in listening.items() if not _loopback(ip)}
    assert not exposed, f"listeners beyond loopback: {exposed}"


def test_down_stops_everything_and_keeps_the_tsdb(running):
    down = stack(running["env"], "down")
    assert down.returncode == 0
    for pid in running["pids"].values():
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
    state = running["tmp"] / "state"
    assert not list((state / "local").glob("*/*.pid"))
    assert any((state / "prometheus-data").iterdir())
    assert "nothing is up" in stack(running["env"], "status").stdout

"""GPU memory attributed to versions on a Kubernetes node: cgroup -> pod UID -> the pod's `version`
label, asked of the API with this node's field selector only.

No Kubernetes API server can run here, so a loopback HTTP server answers the one request the RBAC
Role allows (list pods of a namespace), in the API's own PodList form; everything else gets the
API's 403. The exporter is the real process with the real `kubernetes` client; NVML is the fake
at the hardware boundary, and /proc a tree of files in the kernel's formats."""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from servers import free_port
from prometheus_client.parser import text_string_to_metric_families
from test_exporter.test_exporter import GiB, device, get

from exporter.kube import PodVersions, pod_uid_from_cgroup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UID_29, UID_221 = "6f1e0c7a-3b2d-4e5f-8a9b-0c1d2e3f4a5b", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
CID = "4f1c6a2e9d7b3c5a8e0f2d4b6a8c0e2f4a6c8e0b2d4f6a8c0e2d4f6a8b0c2d4e"
# The kubelet's systemd driver (cgroup v2) and cgroupfs driver (v1), burstable and guaranteed pods
SYSTEMD = (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_29.replace('-', '_')}.slice/"
           f"cri-containerd-{CID}.scope\n")
CGROUPFS = f"12:memory:/kubepods/pod{UID_221}/{CID}\n11:cpu,cpuacct:/kubepods/pod{UID_221}/{CID}\n"


def test_pod_uid_from_every_cgroup_driver():
    assert pod_uid_from_cgroup(SYSTEMD) == UID_29
    assert pod_uid_from_cgroup(CGROUPFS) == UID_221
    assert pod_uid_from_cgroup(f"0::/system.slice/docker-{CID}.scope\n") == ""
    assert pod_uid_from_cgroup("0::/user.slice/pod6f1e0c7a-3b2d-4e5f-8a9b-0c1d2e3f4a5b.scope\n") == ""  # not kubepods


class Api(BaseHTTPRequestHandler):
    pods, seen, forbidden = [], [], False

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        Api.seen.append((url.path, q.get("fieldSelector", [""])[0]))
        if Api.forbidden or url.path != "/api/v1/namespaces/tfsb/pods":
            return self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                    "message": "pods is forbidden", "code": 403})
        node = q.get("fieldSelector", [""])[0].removeprefix("spec.nodeName=")
        items = [{"metadata": {"name": n, "namespace": "tfsb", "uid": uid, "labels": labels},
                  "spec": {"nodeName": on, "containers": [{"name": "tfserving", "image": "tensorflow/serving"}]}}
                 for n, uid, labels, on in Api.pods if on == node]
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def api():
    Api.pods = [("tfserving-2-9-abc", UID_29, {"version": "2.9"}, "node-1"),
                ("tfserving-2-21-def", UID_221, {"version": "2.21"}, "node-1"),
                ("elsewhere", "11111111-2222-4333-8444-555555555555", {"version": "2.12"}, "node-2")]
    Api.seen, Api.forbidden = [], False
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def proc_tree(root, entries):
    for pid, cmd, cgroup in entries:
        d = root / str(pid)
        d.mkdir(parents=True)
        (d / "cmdline").write_bytes("\0".join(cmd).encode() + b"\0")
        (d / "cgroup").write_text(cgroup)


@pytest.mark.integration
def test_exporter_attributes_gpu_memory_to_pod_versions(tmp_path, api):
    # pids above any the kernel hands out here, so the CPU fallback finds no real process under them
    proc_tree(tmp_path / "proc", [(3999001, ["/usr/bin/tensorflow_model_server", "--port=8500"], SYSTEMD),
                                  (3999002, ["/usr/bin/tensorflow_model_server", "--port=8500"], CGROUPFS)])
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({"devices": [device(0, processes=[[3999001, 3 * GiB], [3999002, 1 * GiB]])]}))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT}/tests", FAKE_NVML_STATE=str(state),
               NODE_NAME="node-1", POD_NAMESPACE="tfsb")
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--port", str(port), "--nvml-module", "fake_nvml",
                             "--proc-root", str(tmp_path / "proc"), "--state-dir", str(tmp_path / "none"),
                             "--docker", "off", "--kube", "on", "--kube-api", api],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                s = samples(port)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read().decode()
                time.sleep(0.2)
        assert get(s, "process_gpu_memory_used_bytes", pid="3999001", version="2.9", container=CID[:12]) == 3 * GiB
        assert get(s, "process_gpu_memory_used_bytes", pid="3999002", version="2.21") == 1 * GiB
        assert get(s, "process_gpu_memory_by_version_bytes", version="2.9") == 3 * GiB
        assert Api.seen and set(Api.seen) == {("/api/v1/namespaces/tfsb/pods", "spec.nodeName=node-1")}
    finally:
        proc.terminate()
        proc.wait(10)


def samples(port) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {(x.name, frozenset(x.labels.items())): x.value
            for fam in text_string_to_metric_families(text) for x in fam.samples}


def test_forbidden_api_keeps_the_last_answer_and_counts(api):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = api
    now = [0.0]
    errors = []
    pods = PodVersions(client.CoreV1Api(client.ApiClient(cfg)), "tfsb", "node-1", ttl_s=10, clock=lambda: now[0])
    pods.on_error = errors.append
    assert pods.version(UID_29) == "2.9" and pods.version("") == ""
    assert pods.version("11111111-2222-4333-8444-555555555555") == ""  # another node's pod: not listed
    Api.forbidden, now[0] = True, 11.0
    assert pods.version(UID_221) == "2.21"  # the refresh failed: the last list still answers
    assert errors == ["kube_api"] and "Forbidden" in pods.error
    Api.forbidden, now[0] = False, 22.0
    assert pods.version(UID_221) == "2.21" and pods.error == ""

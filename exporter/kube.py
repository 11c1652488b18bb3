"""Which TF Serving version a process belongs to on a Kubernetes node: cgroup -> pod UID -> the
pod's `version` label.

The exporter runs as a DaemonSet with hostPID (NVML reports host pids). A pid's /proc/<pid>/cgroup
names its pod's UID (every kubelet cgroup driver and QoS class writes it), and the pods of this
node in the exporter's namespace carry the `version` label the manifests give them
(stack/k8s.py). The API is asked with a field selector for this node only: the RBAC Role grants
`get`/`list` on pods of one namespace and nothing else.
"""
from __future__ import annotations

import os
import re
import sys
import time

# cgroupfs: /kubepods/burstable/pod<uid>/<cid>; systemd: kubepods-burstable-pod<uid with _>.slice
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
VERSION_LABEL = "version"


def pod_uid_from_cgroup(text: str) -> str:
    """The pod UID in a /proc/<pid>/cgroup file ("" outside a Kubernetes pod)."""
    for line in text.splitlines():
        if "kubepods" in line:
            m = _POD_UID.search(line)
            if m:
                return m.group(1).replace("_", "-")
    return ""


class PodVersions:
    """{pod uid: version label} of this node's pods, listed at most every ttl_s."""

    def __init__(self, api, namespace: str, node: str, ttl_s: float = 10.0, clock=time.monotonic):
        self.api, self.namespace, self.node, self.ttl_s, self.clock = api, namespace, node, ttl_s, clock
        self._by_uid, self._at, self.error = {}, -1e9, ""
        self.on_error = None  # Health.error: counted in exporter_errors{kind="kube_api"}

    def version(self, uid: str) -> str:
        if not uid:
            return ""
        now = self.clock()
        if now - self._at >= self.ttl_s or (uid not in self._by_uid and now - self._at >= 1.0):
            self._refresh(now)
        return self._by_uid.get(uid, "")

    def _refresh(self, now: float) -> None:
        self._at = now
        try:
            pods = self.api.list_namespaced_pod(self.namespace, field_selector=f"spec.nodeName={self.node}",
                                                _request_timeout=5)
        except Exception as e:  # API unreachable or forbidden: keep the last answer, count it, say it once
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if error != self.error:
                print(f"exporter: cannot list pods of node {self.node}: {error}", file=sys.stderr)
            self.error = error
            if self.on_error:
                self.on_error("kube_api")
            return
        self.error = ""
        self._by_uid = {p.metadata.uid: (p.metadata.labels or {}).get(VERSION_LABEL, "") for p in pods.items}


def from_env(mode: str, host: str | None = None):
    """PodVersions when asked for (or, on auto, inside a pod: KUBERNETES_SERVICE_HOST), else None.
    host: an API server URL instead of the in-cluster one (tests, kubectl proxy)."""
    if mode == "off" or (mode == "auto" and not os.environ.get("KUBERNETES_SERVICE_HOST") and not host):
        return None
    try:
        from kubernetes import client, config

        if host:
            cfg = client.Configuration()
            cfg.host = host
        else:
            config.load_incluster_config()
            cfg = client.Configuration.get_default_copy()
        namespace = os.environ.get("POD_NAMESPACE") or _service_account_namespace()
        node = os.environ["NODE_NAME"]
    except Exception as e:  # no service account, no NODE_NAME: attribution by pid files and labels only
        print(f"exporter: Kubernetes attribution off: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    return PodVersions(client.CoreV1Api(client.ApiClient(cfg)), namespace, node)


def _service_account_namespace() -> str:
    with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
        return f.read().strip()

"""Which TF Serving version (and container) a process belongs to.

* local runtime: the model servers' pid files (.state/local/tf<version>/modelserver.pid; a stale
  one, whose process has another start time, names nobody: `pidfile.read`)
  and, for servers started by hand, the `--version_label=<v>` on their command line (unless this stack's pid
  file names a server of that version: another stack's server with the same label is not counted twice);
* docker runtime: /proc/<pid>/cgroup gives the container id (cgroup v1 and v2
  forms), the docker API (read-only) gives its `tfsb.version` label or image tag;
* Kubernetes: /proc/<pid>/cgroup gives the pod UID, the pod's `version` label says the rest
  (exporter/kube.py).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from fileio import pidfile

_CGROUP_ID = re.compile(r"(?:docker[-/]|/containers/|cri-containerd-|crio-)([0-9a-f]{64})")
_IMAGE_VERSION = re.compile(r"tensorflow/serving:(\d+\.\d+)")


def container_id_from_cgroup(text: str) -> str:
    """The 64-hex container id in a /proc/<pid>/cgroup file, or "" (not in a container)."""
    for line in text.splitlines():
        m = _CGROUP_ID.search(line)
        if m:
            return m.group(1)
    return ""


class Attributor:
    def __init__(self, state_dir: str | Path | None, proc_root: str | Path = "/proc", docker_client=None,
                 ttl_s: float = 1.0, clock=time.monotonic, pods=None):
        self.state_dir = Path(state_dir) if state_dir else None
        self.proc = Path(proc_root)
        self.docker, self.pods = docker_client, pods  # pods: a kube.PodVersions, or None
        self._containers = {}
        self._cgroups = {}   # pid -> container id (a process never changes container)
        self._servers, self._servers_at, self.ttl_s, self.clock = {}, -1e9, ttl_s, clock

    def _cmdline(self, pid: int) -> list:
        try:
            return (self.proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return []

    def model_servers(self) -> dict:
        """{pid: version} of the model servers this host runs (rescanned at most every ttl_s)."""
        now = self.clock()
        if now - self._servers_at >= self.ttl_s:
            self._servers, self._servers_at = self._scan(), now
        return self._servers

    def _scan(self) -> dict:
        found = {}
        if self.state_dir and self.state_dir.is_dir():
            for pid_file in self.state_dir.glob("tf*/modelserver.pid"):
                pid = pidfile.read(pid_file, self.proc)  # None when stale: after pid reuse it is not ours
                if pid is not None and self._cmdline(pid):
                    found[pid] = pid_file.parent.name[2:]
        claimed = set(found.values())  # a version this stack runs is its pid file's process, and only that
        for entry in self.proc.iterdir() if self.proc.is_dir() else []:
            if not entry.name.isdigit() or int(entry.name) in found:
                continue
            args = self._cmdline(int(entry.name))
            if not args or not any(a == "modelserver" or a.endswith("tensorflow_model_server") for a in args[:4]):
                continue
            label = next((a.split("=", 1)[1] for a in args if a.startswith("--version_label=")), "")
            if label and label in claimed:
                continue  # another stack's server of the same version (a second state dir, a test's): not ours
            version = label or self._container_version(self.container_of(int(entry.name))) or \
                self._pod_version(int(entry.name))
            if version:
                found[int(entry.name)] = version
        return found

    def container_of(self, pid: int) -> str:
        if pid not in self._cgroups:
            try:
                self._cgroups[pid] = container_id_from_cgroup((self.proc / str(pid) / "cgroup").read_text())
            except OSError:
                return ""
            if len(self._cgroups) > 4096:  # pids are reused: forget old ones now and then
                self._cgroups = {pid: self._cgroups[pid]}
        return self._cgroups[pid]

    def _container_version(self, cid: str) -> str:
        if not cid or self.docker is None:
            return ""
        if cid not in self._containers:
            try:
                c = self.docker.containers.get(cid)
                labels = c.labels or {}
                image = " ".join(c.image.tags) if c.image is not None else ""
            except Exception:  # the container went away, or the socket is unreadable
                return ""
            m = _IMAGE_VERSION.search(image)
            self._containers[cid] = labels.get("tfsb.version") or (m.group(1) if m else "")
        return self._containers[cid]

    def _pod_version(self, pid: int) -> str:
        if self.pods is None:
            return ""
        from exporter.kube import pod_uid_from_cgroup

        try:
            return self.pods.version(pod_uid_from_cgroup((self.proc / str(pid) / "cgroup").read_text()))
        except OSError:
            return ""

    def attribute(self, pid: int, servers: dict | None = None) -> tuple:
        """(container id or "", version or "") for a pid."""
        servers = self.model_servers() if servers is None else servers
        cid = self.container_of(pid)
        return cid[:12], servers.get(pid) or self._container_version(cid) or self._pod_version(pid)

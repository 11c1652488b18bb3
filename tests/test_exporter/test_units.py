"""Sampler peaks and cgroup attribution, in-process, with the fake NVML module."""

import fake_nvml
import pytest

from fileio import pidfile

from exporter.attribution import Attributor, container_id_from_cgroup
from exporter.collectors import Health
from exporter.nvml_source import NvmlSource
from exporter.sampler import Sampler

CID = "4f1c6a2e9d7b3c5a8e0f2d4b6a8c0e2f4a6c8e0b2d4f6a8c0e2d4f6a8b0c2d4e"
CGROUP_V1 = f"""12:memory:/docker/{CID}
11:cpu,cpuacct:/docker/{CID}
1:name=systemd:/docker/{CID}
"""
CGROUP_V2 = f"0::/system.slice/docker-{CID}.scope\n"
CGROUP_HOST = "0::/user.slice/user-0.slice/session-3.scope\n"


def test_container_id_from_both_cgroup_formats():
    assert container_id_from_cgroup(CGROUP_V1) == CID
    assert container_id_from_cgroup(CGROUP_V2) == CID
    assert container_id_from_cgroup(CGROUP_HOST) == ""


class Docker:
    """The docker SDK's shape for one container (the only other process boundary here)."""
    class containers:
        @staticmethod
        def get(cid):
            assert cid == CID
            return type("C", (), {"labels": {}, "image": type("I", (), {"tags": ["tensorflow/serving:2.12.1"]})()})()


def test_attribution_from_a_proc_tree(tmp_path):
    proc = tmp_path / "proc"
    for pid, cmd, cgroup in ((100, ["tensorflow_model_server", "--port=8500"], CGROUP_V2),
                             (200, ["python", "-m", "modelserver", "--version_label=2.9"], CGROUP_HOST),
                             (300, ["bash"], CGROUP_HOST)):
        d = proc / str(pid)
        d.mkdir(parents=True)
        (d / "cmdline").write_bytes("\0".join(cmd).encode() + b"\0")
        (d / "cgroup").write_text(cgroup)
    a = Attributor(None, proc, Docker())
    assert a.model_servers() == {100: "2.12", 200: "2.9"}
    assert a.attribute(100) == (CID[:12], "2.12")
    assert a.attribute(200) == ("", "2.9")
    assert a.attribute(300) == ("", "")


def _stat(pid: int, start: int) -> str:
    """A /proc/<pid>/stat line (the command name holds a space and a parenthesis, as it may)."""
    return f"{pid} (model server) S " + " ".join(["0"] * 18) + f" {start} 0 0\n"


def test_attribution_ignores_a_stale_pid_file(tmp_path):
    """After a crash and pid reuse the local runtime's pid file names another process: the
    exporter uses the stack's own stale check and attributes nothing to that version."""
    proc, state = tmp_path / "proc", tmp_path / "state"
    for pid, start, cmd in ((400, 111, ["python", "-m", "modelserver", "--port=9000"]),  # pid file's own process
                            (500, 999, ["postgres"])):                                  # pid reused by a stranger
        d = proc / str(pid)
        d.mkdir(parents=True)
        (d / "cmdline").write_bytes("\0".join(cmd).encode() + b"\0")
        (d / "cgroup").write_text(CGROUP_HOST)
        (d / "stat").write_text(_stat(pid, start))
    for version, line in (("2.9", "400 111\n"), ("2.21", "500 222\n")):  # 2.21's file: pid 500 started at 222
        (state / f"tf{version}").mkdir(parents=True)
        (state / f"tf{version}" / "modelserver.pid").write_text(line)
    a = Attributor(state, proc, Docker())
    assert a.model_servers() == {400: "2.9"}
    assert a.attribute(500) == ("", "")
    assert pidfile.stale(state / "tf2.21" / "modelserver.pid", proc)
    assert not pidfile.stale(state / "tf2.9" / "modelserver.pid", proc)


def test_another_stacks_server_of_the_same_version_is_not_attributed(tmp_path):
    """Two stacks on one machine (the user's demo and a test's, two state dirs): each server carries
    --version_label=2.21; the exporter of one stack counted both, and a compare's RSS of 2.21 read twice its size."""
    proc, state = tmp_path / "proc", tmp_path / "state"
    for pid, cmd in ((400, ["python", "-m", "modelserver", "--version_label=2.21"]),   # this stack's (pid file)
                     (600, ["python", "-m", "modelserver", "--version_label=2.21"]),   # another stack's
                     (700, ["python", "-m", "modelserver", "--version_label=2.9"])):   # by hand: still counted
        d = proc / str(pid)
        d.mkdir(parents=True)
        (d / "cmdline").write_bytes("\0".join(cmd).encode() + b"\0")
        (d / "cgroup").write_text(CGROUP_HOST)
        (d / "stat").write_text(_stat(pid, 111))
    (state / "tf2.21").mkdir(parents=True)
    (state / "tf2.21" / "modelserver.pid").write_text("400 111\n")
    assert Attributor(state, proc, Docker()).model_servers() == {400: "2.21", 700: "2.9"}


def test_sampler_keeps_the_peak_between_scrapes():
    cfg = {"devices": [{"name": "g", "uuid": "u", "used": 1000, "total": 10000, "reserved": None,
                        "processes": [[42, 500]]}]}
    fake_nvml.configure(cfg)
    health = Health()
    sampler = Sampler(NvmlSource(fake_nvml, health.error), interval_s=0.1)
    sampler.sample_once()
    cfg["devices"][0].update(used=9000, processes=[[42, 8000]])  # a short spike...
    sampler.sample_once()
    cfg["devices"][0].update(used=1200, processes=[[42, 700]])   # ...gone before the scrape
    sampler.sample_once()
    latest, dev_peak, proc_peak = sampler.take()
    assert latest[0].memory_used == 1200
    assert dev_peak == {0: 9000} and proc_peak == {(0, 42): 8000}
    _, dev_peak, proc_peak = sampler.take()  # the next window starts from the current values
    assert dev_peak == {0: 1200} and proc_peak == {(0, 42): 700}
    fake_nvml.configure(None)


def test_bad_sampling_interval_is_refused():
    with pytest.raises(ValueError):
        Sampler(None, 0)



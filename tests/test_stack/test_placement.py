"""Client and servers on disjoint cores where the machine has enough of them; the same cpusets in
the local runtime (sched_setaffinity) and in compose (cpuset)."""
import os
import subprocess
import sys

import pytest
import yaml

from stack.compose import generate
from core.placement import Placement, pin_child, plan
from core.registry import load_registry


def test_four_or_more_cores_are_split_disjoint_and_fewer_are_shared_and_said():
    p = plan(8)
    assert p.isolated and p.client == [0, 1] and p.servers == [2, 3, 4, 5, 6, 7]
    assert not set(p.client) & set(p.servers)
    assert plan(4).client == [0] and plan(4).servers == [1, 2, 3]
    two = plan(2)
    assert not two.isolated and two.client == two.servers == [0, 1] and "at least 4" in two.reason
    off = plan(16, isolate=False)
    assert not off.isolated and "ISOLATE=0" in off.reason
    assert Placement.cpuset([2, 3, 4, 7, 9, 10]) == "2-4,7,9-10"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
def test_a_pinned_child_runs_only_on_its_cores_from_the_start():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, preexec_fn=pin_child([cpu]), check=True).stdout
    assert out.strip() == f"[{cpu}]"


def test_compose_pins_servers_and_loadgen_through_cpusets():
    services = generate(list(load_registry().versions.values()))["services"]
    servers = [s for n, s in services.items() if n.startswith("tfserving-")]
    assert servers and all(s["cpuset"] == "${TFSB_SERVER_CPUSET:-}" for s in servers)
    assert services["loadgen"]["cpuset"] == "${TFSB_CLIENT_CPUSET:-}"
    assert yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "../../docker-compose.yml")))[
        "services"]["loadgen"]["cpuset"] == "${TFSB_CLIENT_CPUSET:-}"

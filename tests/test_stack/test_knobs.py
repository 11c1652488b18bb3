"""KNOBS: each combination of TF settings is a server of its own, with its own ports, environment and flags."""
import pytest

from core import ports
from stack import knobs
from stack.local import server_command
from core.registry import load_registry


def test_every_combination_of_every_version_is_a_named_server_on_its_own_ports():
    reg = load_registry()
    reg2, variants = knobs.expand(reg, reg.select("2.9 2.21"), "onednn=0,1 intra_op=2")
    assert [v.name for v in variants] == ["2.9-onednn0-intra2", "2.9-onednn1-intra2",
                                          "2.21-onednn0-intra2", "2.21-onednn1-intra2"]
    assert all(v.family in ("2.9", "2.21") and v.python == "3.10" for v in variants)  # same venv, model, Python
    taken = [p for v in reg2.versions.values() for p in (v.ports.grpc, v.ports.rest)]
    assert len(taken) == len(set(taken))
    v = variants[1]
    assert knobs.env(v.knobs) == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert knobs.flags(v.knobs) == ["--tensorflow_intra_op_parallelism=2"]
    assert knobs.threads(v.knobs) == {"intra_op": 2}
    cmd = server_command("python", v, "models.config")
    assert "--tensorflow_intra_op_parallelism=2" in cmd and f"--rest_api_port={ports.rest(v)}" in cmd


def test_no_knobs_leaves_the_versions_as_they_are():
    reg = load_registry()
    versions = reg.select("2.9")
    assert knobs.expand(reg, versions, "") == (reg, versions)


@pytest.mark.parametrize("text, needle", [
    ("gpu=1", "unknown knob 'gpu'"), ("onednn", "needs values"), ("onednn=2", "onednn takes 0 or 1"),
    ("intra_op=0", "thread counts 1..1024"), ("intra_op=x", "thread counts"), ("onednn=0,0", "given twice"),
    ("onednn=0 onednn=1", "given twice")])
def test_a_bad_knob_is_one_line(text, needle):
    with pytest.raises(knobs.KnobError, match=needle):
        knobs.parse(text)


def test_too_many_combinations_for_the_ports_are_refused():
    reg = load_registry()
    with pytest.raises(knobs.KnobError, match="too many for 2.9's ports"):
        knobs.expand(reg, reg.select("2.9 2.12"), "intra_op=" + ",".join(map(str, range(1, 20))))


def test_a_thread_knob_gives_the_ceiling_the_servers_cores_and_the_report_says_so():
    """One pinned core keeps the ceiling quiet, but a compare of thread counts on one core measures only
    oversubscription (intra_op=4 there: 51% slower, while its server on two cores did 10% more QPS)."""
    from types import SimpleNamespace

    from analysis.ceiling import ceiling_core
    from analysis.report_text import _pinned

    reg = load_registry()
    on_cores = SimpleNamespace(cpus=[2, 3])  # an isolated placement's server cores
    _, onednn = knobs.expand(reg, reg.select("2.9"), "onednn=0,1")
    _, threads = knobs.expand(reg, reg.select("2.9"), "intra_op=1,4")
    assert ceiling_core(on_cores, reg.select("2.9"), pin=True) == [3]  # the "kernels alone" diagnostic
    assert ceiling_core(on_cores, onednn, pin=True) == [3]
    assert ceiling_core(on_cores, threads, pin=True) == [2, 3]
    assert ceiling_core(on_cores, reg.select("2.9")) == [2, 3]  # the headline: as the servers run
    one = {"_run": {"ceiling": {"a": {"cores": [3]}, "b": {"cores": [3]}}}}
    both = {"_run": {"ceiling": {"a": {"cores": [2, 3]}, "b": {"cores": [2, 3]}}}}
    assert _pinned(one).startswith(", each pinned to core 3:")
    assert _pinned(both).startswith(", each on the servers' cores 2, 3 with TensorFlow's thread pools sized by them")
    both["config"] = {"servers": {"a": {"knobs": {"intra_op": "1"}}, "b": {"knobs": {"intra_op": "4"}}}}
    assert _pinned(both).startswith(", each on the servers' cores 2, 3: thread counts are compared")

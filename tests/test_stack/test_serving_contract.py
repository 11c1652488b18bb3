"""One Serving contract: every runtime implements all of it, so analysis/ never asks which kind it holds."""
import inspect

import pytest

from core.registry import load_registry
from stack.docker_serving import DockerServing
from stack.external import ExternalServing, parse_targets
from stack.local_serving import LocalServing
from stack.serving import Serving

METHODS = [n for n, v in vars(Serving).items() if inspect.isfunction(v) and not n.startswith("_")]


def test_the_contract_names_what_compare_calibrate_and_scenarios_use():
    assert set(METHODS) == {"check", "up", "cold_start", "restart", "resources", "monitoring", "model_dir", "ceiling_command",
                            "server_path"}


@pytest.mark.parametrize("cls", [LocalServing, DockerServing, ExternalServing])
def test_every_runtime_has_every_method_with_the_contracts_parameters(cls):
    for name in METHODS:
        mine, theirs = inspect.signature(getattr(cls, name)), inspect.signature(getattr(Serving, name))
        assert list(theirs.parameters) == list(mine.parameters)[:len(theirs.parameters)], (cls.__name__, name)


def test_local_and_external_servings_are_servings_and_an_external_one_has_no_cold_start():
    reg = load_registry()
    local = LocalServing(reg, reg.select("2.9"))
    external = ExternalServing(parse_targets("a=rest://127.0.0.1:1"), "http://127.0.0.1:2", reg)
    assert isinstance(local, Serving) and isinstance(external, Serving)
    assert local.prometheus_url is None and external.prometheus_url == "http://127.0.0.1:2"
    assert external.cold_start(external.servers[0], None) is None and external.cpus is None
    with pytest.raises(ValueError, match="runs elsewhere"):
        external.restart(external.servers[0])
    # a second model's base (the neighbour scenario): a local server reads this machine's paths, others do not
    assert local.server_path(local.servers[0], "/tmp/x/../b") == "/tmp/b"
    assert external.server_path(external.servers[0], "/tmp/b") is None

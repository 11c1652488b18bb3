"""The one place a runtime's name becomes its Serving (stack/serving.py's contract)."""
from __future__ import annotations

from stack.docker_serving import DockerServing
from stack.external import ExternalServing, parse_targets
from stack.local_serving import LocalServing


def serving_for(runtime: str, registry, versions: list, model_path: str | None = None, cpus: list | None = None,
                log=print, model_for: dict | None = None, targets: str = "", prometheus: str = "",
                model_name: str = "my_model"):
    """The Serving of a runtime: "local" or "docker" (stack.runtime.pick_runtime), or "external": TARGETS' servers
    and the PROMETHEUS that scrapes them (versions unused: the targets name themselves)."""
    if runtime == "external":
        return ExternalServing(parse_targets(targets), prometheus, registry, model_path, model_name)
    if runtime == "docker":
        return DockerServing(registry, versions, model_path, cpus=cpus, log=log, model_for=model_for)
    return LocalServing(registry, versions, model_path, cpus=cpus, log=log, model_for=model_for)

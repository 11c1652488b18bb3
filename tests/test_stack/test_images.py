"""Every registry version runs in a container of its offline image (`make images`): the versions the docker compare
tests do not start (2.6, 2.8, 2.12; tests/test_analysis/test_docker_compare.py starts the tested two) start with
batching on, load the example model, and answer a predict with its probabilities, each on its own TensorFlow.
Before this test, the 2.12 container exited at once ("No module named 'distutils.spawn'") and the 2.6 image could
not be built (TF 2.6's wrapt has no wheel; it was built for the host's Python)."""
import json
import subprocess

import pytest
from servers import TEST_VERSIONS, example_model

from fileio import http
from stack import images
from stack.compose import image_variable
from stack.docker_serving import DockerServing
from core.registry import load_registry

pytestmark = pytest.mark.integration


def test_every_registry_version_starts_in_its_image_and_answers(engine, monkeypatch):
    reg = load_registry()
    others = [v for v in reg.versions.values() if v.name not in TEST_VERSIONS]
    assert {v.name for v in others} == {"2.6", "2.8", "2.12"}, "the registry changed: keep every version started"
    for v in others:
        monkeypatch.setenv(image_variable(v.name), images.build_tfserving(v.name, log=lambda *_: None))
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", "tfsbimagestest")
    serving = DockerServing(reg, others, model_path=str(example_model(TEST_VERSIONS[0])), log=lambda *_: None)
    try:
        serving.up(batching=True)
        for v, s in zip(others, serving.servers):
            answer = json.loads(http.get(f"http://127.0.0.1:{s.rest}/v1/models/{s.model}:predict", timeout_s=30,
                                         data=json.dumps({"instances": [[0.5] * 784] * 2}).encode()))
            probs = answer["predictions"]
            assert len(probs) == 2 and len(probs[0]) == 10 and abs(sum(probs[0]) - 1) < 1e-4, (v.name, answer)
            site = subprocess.run(["docker", "exec", serving.name(v), "ls", images.SITE], capture_output=True,
                                  text=True, timeout=60).stdout.split()
            assert f"tensorflow_cpu-{v.tensorflow}.dist-info" in site, (v.name, [d for d in site if "tensorflow" in d])
    finally:
        serving.down()

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/servers.py and friends

from servers import TEST_VERSIONS, start_modelserver  # noqa: E402

# `make` exports RUNTIME=auto, and the docker tests start an engine: a test that means the local
# runtime must not end up in docker because another test left one running. Tests that want docker
# say --runtime docker.
os.environ["RUNTIME"] = "local"

# The suite never touches the user's stack (the one `make demo` or `make up` left running): its own state,
# results and baselines directories, and its own port range. Every subprocess inherits these; a test that
# starts a stack of its own still sets an offset of its own beside it. Set before any project import.
ISOLATION = Path(tempfile.mkdtemp(prefix="tfsb-tests-"))
# 29560.., 30090, 30400, 30464: apart from the per-test offsets (9000 .. 19000), and every port of the suite below
# 32768, outside Linux's ephemeral range (32768-60999), where client connections take their local ports: once
# something held 38590 for seconds (likely such a connection) and three compares found their port "taken"
SUITE_PORT_OFFSET = 21000
os.environ.update(TFSB_STATE=str(ISOLATION / "state"), TFSB_RESULTS=str(ISOLATION / "results"),
                  TFSB_BASELINES=str(ISOLATION / "baselines"), TFSB_PORT_OFFSET=str(SUITE_PORT_OFFSET))


def _docker_info() -> bool:
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """One docker engine for every docker test: the one that answers, or dockerd started here as
    the README says (vfs, no iptables, no default bridge). No engine fails the test, never skips it."""
    if _docker_info():
        yield
        return
    dockerd = shutil.which("dockerd")
    if not dockerd:
        pytest.fail("no docker engine and no dockerd: `make setup` installs Debian's docker.io (as root)")
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([dockerd, "--storage-driver=vfs", "--iptables=false", "--bridge=none"],
                                stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not _docker_info():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"dockerd did not start: {log.read_text()[-1500:]}")
        time.sleep(1)
    yield
    proc.terminate()
    proc.wait(60)


@pytest.fixture(scope="session")
def offline_images(engine):
    """The offline images of the tested versions and the base image, built once (cached by content
    on the engine across runs): {"env": the export variables, "base": tag, version: tag}."""
    from stack import images
    from stack.compose import image_variable

    quiet = lambda *_: None  # noqa: E731
    out = {"base": images.build_base(log=quiet)}
    out.update({v: images.build_tfserving(v, log=quiet) for v in TEST_VERSIONS})
    out["env"] = {**{image_variable(v): out[v] for v in TEST_VERSIONS}, "PROMETHEUS_IMAGE": out["base"],
                  "EXPORTER_IMAGE": out["base"]}
    return out


@pytest.fixture(scope="session", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def server(request, tmp_path_factory):
    """A model server per tested TF version, batching off, shared by the session."""
    s = start_modelserver(request.param, tmp_path_factory.mktemp(f"ms{request.param}"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def reference():
    """In-process reference: the same SavedModel called through its signature in this process's TF."""
    import numpy as np
    import tensorflow as tf

    cache = {}

    def predict(base_path, x):
        key = str(base_path)
        if key not in cache:
            cache[key] = tf.saved_model.load(str(Path(base_path) / "1"))
        return cache[key].signatures["serving_default"](x=tf.constant(np.asarray(x, np.float32)))["probabilities"].numpy()
    return predict

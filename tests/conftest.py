import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/servers.py and friends

from servers import TEST_VERSIONS, start_modelserver  # noqa: E402


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

"""make compare MODEL=recommender: a TFX-style model (serialized tf.Example in) compared end to end over REST and
gRPC through its classify signature, every window free of errors and reconciled exactly, requests drawn from a
set of distinct Examples built from its graph, the model exported once by the oldest release compared."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from servers import TEST_VERSIONS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

PROFILE = ("concurrency: [4]\nwindow_s: 2\nwarmup_s: 0.5\nsearch_probes: 0\nceiling_windows: 2\nceiling_window_s: 0.3\n"
           "ceiling_pinned_windows: 0\nsoak_s: 0\noptrace_processes: 0\nrepeat: 2\n")


def test_a_tf_example_model_compared_through_classify_over_both_protocols(tmp_path):
    env = dict(os.environ, TFSB_PORT_OFFSET="18000", TFSB_STATE=str(tmp_path / "state"),
               TFSB_RESULTS=str(tmp_path / "results"), PYTHONPATH=str(ROOT))
    profile = tmp_path / "zoo.yaml"
    profile.write_text(PROFILE)
    try:
        out = subprocess.run([sys.executable, "-m", "analysis", "compare", "--versions", " ".join(TEST_VERSIONS),
                              "--model", "recommender", "--api", "classify", "--protocol", "both", "--rows", "8",
                              "--profile", str(profile), "--runtime", "local"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
        # `make up` (and the demo) after it: the servers that serve the recommender restart with the example model
        up = subprocess.run([sys.executable, "-m", "stack", "up", "--versions", TEST_VERSIONS[0], "--runtime", "local"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert up.returncode == 0 and "recommender; restarting it with" in up.stdout, up.stdout[-2000:] + up.stderr[-2000:]
    assert out.stdout.count("classify, 64 distinct requests, tf.Examples from the graph's parse spec") == 4
    run_id = re.search(r"run id (\S+)", out.stdout).group(1)
    d = Path(env["TFSB_RESULTS"]) / run_id
    data = json.loads((d / "compare.json").read_text())
    cells = list(data["cells"].values())
    assert len(cells) == 2 * 2 * len(TEST_VERSIONS)  # 2 protocols x 2 repeats x versions
    assert all(c["valid"] and c["client"]["errors"] == {} and c["client"]["ok"] > 50 for c in cells), cells
    assert all(c["server"]["steady"]["requests"] == c["client"]["completed"] for c in cells)  # client = server
    rep = json.loads((d / "report.json").read_text())
    assert all(c["client_vs_server"]["exact"] and c["client_vs_server"]["ok"] for c in rep["crosscheck"])
    assert {c["version"] for c in rep["ceiling"]} == set(TEST_VERSIONS)  # the ceiling ran the same Examples
    # the same Examples to every version: a verdict per output of the classify signature
    verdicts = {r["output"]: r["verdict"] for r in rep["outputs"]}
    assert set(verdicts) == {"scores", "classes"} and verdicts["classes"] == "identical", rep["outputs"]
    assert verdicts["scores"] in ("identical", "within 1e-5", "differ"), verdicts
    md = (d / "report.md").read_text()
    assert "## Outputs (the same requests, each version against the baseline)" in md
    assert re.search(r"Model: \S+recommender, exported once by TensorFlow 2\.9\.\d+ and served unchanged by every "
                     r"version; API classify", md), md[-800:]


@pytest.mark.parametrize("model,protocol,signature,source,outputs", [
    ("image", "rest", "serving_bytes", "JPEG images for the graph's image decoder", {"probabilities"}),
    ("text", "grpc", "serving_default", "tensors from the signature", {"logits", "pooled"}),
], ids=["image-bytes-rest", "text-grpc"])
def test_an_image_and_a_text_model_are_compared_with_no_option_but_the_model(tmp_path, model, protocol, signature,
                                                                             source, outputs):
    """The zoo's ResNet-50 through its image-bytes signature over REST (JPEGs decoded in the graph) and its BERT-style
    encoder over gRPC (int32 token ids): zero errors in every window and an outputs verdict per output."""
    env = dict(os.environ, TFSB_PORT_OFFSET="18000", TFSB_STATE=str(tmp_path / "state"),
               TFSB_RESULTS=str(tmp_path / "results"), PYTHONPATH=str(ROOT))
    profile = tmp_path / "zoo.yaml"
    profile.write_text(PROFILE.replace("repeat: 2", "repeat: 1").replace("window_s: 2", "window_s: 1.5"))
    try:
        out = subprocess.run([sys.executable, "-m", "analysis", "compare", "--versions", " ".join(TEST_VERSIONS),
                              "--model", model, "--signature", signature, "--protocol", protocol, "--rows", "2",
                              "--profile", str(profile), "--runtime", "local"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
    finally:
        subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert source in out.stdout
    run_id = re.search(r"run id (\S+)", out.stdout).group(1)
    rep = json.loads((Path(env["TFSB_RESULTS"]) / run_id / "report.json").read_text())
    cells = list(json.loads((Path(env["TFSB_RESULTS"]) / run_id / "compare.json").read_text())["cells"].values())
    assert cells and all(c["valid"] and c["client"]["errors"] == {} for c in cells), cells
    assert {r["output"] for r in rep["outputs"]} == outputs
    assert all(r["verdict"] in ("identical", "within 1e-5", "differ") for r in rep["outputs"]), rep["outputs"]

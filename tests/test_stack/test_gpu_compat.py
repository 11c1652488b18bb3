"""GPUs newer than an image's machine code: TF Serving 2.6-2.12 -gpu images end at compute_80, so on
an H100/H200 (9.0, NVML injected: tests/fake_nvml.py) they get a warning and a longer startup budget."""
import json
import sys
from pathlib import Path

from stack import gpu_compat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _fake(tmp_path, monkeypatch, caps):
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({"devices": [{"name": "GPU", "uuid": f"GPU-{i}", "compute_capability": c}
                                             for i, c in enumerate(caps)]}))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    return gpu_compat.gpu_capabilities("fake_nvml")


def test_old_images_on_a_newer_gpu_are_warned_and_newer_ones_not(tmp_path, monkeypatch):
    caps = _fake(tmp_path, monkeypatch, [[9, 0]])
    assert caps == [(9, 0)]
    for old in ("2.6", "2.9", "2.12", "2.12-b"):
        w = gpu_compat.check(old, caps)
        assert "up to compute capability 8.0, this GPU is 9.0" in w and "JIT-compiled" in w
    assert gpu_compat.check("2.21", caps) == ""


def test_gpus_the_image_covers_and_no_gpu_give_no_warning(tmp_path, monkeypatch):
    assert gpu_compat.check("2.9", _fake(tmp_path, monkeypatch, [[8, 0], [7, 5]])) == ""
    assert gpu_compat.check("2.9", []) == ""
    assert gpu_compat.gpu_capabilities("no_such_nvml_module") == []

"""Each image installs only its component's dependencies: the load generator and the exporter run
from a venv holding nothing but their own dependency group (no TensorFlow, no matplotlib, and NVML
only where it is read), and their Dockerfiles install exactly that group."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "tensorflow-cpu", "matplotlib", "scipy")


def uv():
    return shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def requirements(name: str) -> list:
    """The locked requirement lines of a group, environment markers kept."""
    out = subprocess.run([uv(), "export", "--frozen", "--only-group", name, "--no-hashes", "--no-header",
                          "--no-annotate"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ln.strip() for ln in out.splitlines() if ln.strip() and ln[0] not in "#-"]


def group(name: str) -> list:
    return [ln.split("==")[0].split(";")[0].strip() for ln in requirements(name)]


@pytest.mark.parametrize("component,forbidden", [("loadgen", HEAVY + ("nvidia-ml-py", "docker")),
                                                 ("exporter", HEAVY + ("grpcio",))])
def test_a_components_group_holds_only_what_it_needs(component, forbidden):
    pins = group(component)
    assert pins and not set(pins) & set(forbidden), pins
    dockerfile = (ROOT / component / "Dockerfile").read_text()
    assert f"--only-group {component}" in dockerfile and "--no-dev" not in dockerfile


@pytest.mark.integration
def test_loadgen_and_exporter_run_from_their_own_groups_alone(tmp_path):
    for component, check in (("loadgen", "from loadgen import app, payload, tfproto, drivers, cli\n"
                                         "import sys; assert 'tensorflow' not in sys.modules"),
                             ("exporter", "import exporter.__main__, exporter.collectors")):
        venv = tmp_path / component
        subprocess.run([uv(), "venv", "-q", "-p", sys.executable, str(venv)], check=True)
        req = tmp_path / f"{component}.txt"
        req.write_text("\n".join(requirements(component)) + "\n")
        env = dict(os.environ, VIRTUAL_ENV=str(venv))
        subprocess.run([uv(), "pip", "install", "-q", "-r", str(req)], check=True, env=env, timeout=600)
        py = venv / "bin" / "python"
        run = subprocess.run([str(py), "-c", check], cwd=ROOT, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        cli = subprocess.run([str(py), "-m", component, *(["run"] if component == "loadgen" else []), "--help"],
                             cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert cli.returncode == 0 and "usage" in cli.stdout, cli.stderr[-2000:]

"""Prometheus' own checker on everything the stack gives Prometheus: both runtimes' configs, every
rule and alert file, and the rule unit tests (each alert with a case where it must not fire)."""
import shutil
import subprocess
from pathlib import Path

import pytest

from stack import promconfig
from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "prometheus"


@pytest.fixture(scope="module")
def promtool():
    tool = shutil.which("promtool")
    assert tool, "promtool missing: `make setup` installs Debian's prometheus package"
    return tool


def run(promtool, *args, cwd=ROOT):
    proc = subprocess.run([promtool, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_docker_runtimes_config_is_the_committed_one_and_valid(promtool):
    versions = list(load_registry().versions.values())
    assert (PROM / "prometheus.yml").read_text() == promconfig.render(promconfig.generate(versions, "docker")), \
        "prometheus/prometheus.yml is stale: python -m stack promconfig --runtime docker > prometheus/prometheus.yml"
    out = run(promtool, "check", "config", PROM / "prometheus.yml")  # rule files resolve from the config's dir
    assert "SUCCESS" in out and "rules found" in out


def test_the_local_runtimes_config_is_valid(promtool, tmp_path, monkeypatch):
    monkeypatch.setenv("TFSB_STATE", str(tmp_path / "state"))
    versions = list(load_registry().versions.values())
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(promconfig.render(promconfig.generate(versions, "local")))
    assert "SUCCESS" in run(promtool, "check", "config", cfg)


def test_every_rule_and_alert_file_checks_and_their_unit_tests_pass(promtool):
    files = sorted((PROM / "rules").glob("*.yml")) + sorted((PROM / "alerts").glob("*.yml"))
    assert len(files) >= 3
    assert run(promtool, "check", "rules", *files).count("SUCCESS") == len(files)
    for test in sorted((PROM / "tests").glob("*.yml")):
        assert "SUCCESS" in run(promtool, "test", "rules", test.name, cwd=PROM / "tests")

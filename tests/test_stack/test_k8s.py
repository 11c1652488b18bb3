"""The Kubernetes manifests, checked offline the way CI checks manifests where no cluster runs:
kustomize builds them (kubectl), every built-in object validates against the API schemas of pinned
Kubernetes releases (kubernetes-validate), the PrometheusRules pass promtool and the rule tests,
the dashboards are byte-identical, every container is bounded and locked down, images come from
stack/versions.yaml. And the checked-in tree is the one `make k8s` writes."""
import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "deploy" / "k8s" / "generated"
# The oldest release the manifests promise (Indexed Jobs label pods with their Job's uid since 1.27) and
# the newest the pinned kubernetes-validate knows.
K8S_VERSIONS = ("1.30.0", "1.37.0")
BUILT_IN = ("v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1")
VERSIONS = "2.9 2.21"


def make_k8s(out: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stack", "k8s", "--versions", VERSIONS, "--out", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k not in ("GPU", "OUT", "VERSIONS")})


def kustomize(path: Path) -> list:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl missing: `make setup` installs Debian's kubernetes-client"
    proc = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.fixture(scope="module", params=["default", "gpu", "uri"])
def tree(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("k8s") / "generated"
    args = {"default": [], "gpu": ["--gpu"], "uri": ["--model-base-path", "gs://bucket/models/my_model"]}[request.param]
    proc = make_k8s(out, *args)
    assert proc.returncode == 0, proc.stderr
    return request.param, out, kustomize(out) + kustomize(out / "loadgen")


def test_checked_in_tree_is_what_make_k8s_writes(tmp_path):
    assert make_k8s(tmp_path / "generated").returncode == 0
    cmp = filecmp.dircmp(tmp_path / "generated", CHECKED_IN)
    stale = cmp.diff_files + cmp.left_only + cmp.right_only + [
        f"loadgen/{f}" for f in cmp.subdirs["loadgen"].diff_files + cmp.subdirs["loadgen"].left_only]
    assert not stale, f"deploy/k8s/generated is stale ({stale}): run `make k8s`"


def test_built_in_objects_validate_against_the_api_schemas(tree):
    _, _, docs = tree
    kinds = set()
    for d in docs:
        if d["apiVersion"] in BUILT_IN:
            for version in K8S_VERSIONS:
                kubernetes_validate.validate(d, version, strict=True)  # raises on any unknown or wrong field
            kinds.add(d["kind"])
    assert {"Namespace", "ConfigMap", "Deployment", "Service", "DaemonSet", "Job", "Role", "RoleBinding",
            "ServiceAccount"} <= kinds
    assert all(d["metadata"].get("namespace") == "tfserving-bench" for d in docs if d["kind"] != "Namespace")


def test_every_container_is_bounded_and_locked_down(tree):
    _, _, docs = tree
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "DaemonSet", "Job")]
    assert len(pods) == 4  # two servers, the exporter, the load generator
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        for c in pod["containers"]:
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and \
                   {"cpu", "memory"} <= set(c["resources"]["limits"]), c["name"]
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]


def test_servers_use_the_registry_images_flags_probes_and_version_label(tree):
    name, _, docs = tree
    reg = load_registry()
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"tfserving-2-9", "tfserving-2-21"}
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for v in reg.select(VERSIONS):
        d = deployments[f"tfserving-{v.name.replace('.', '-')}"]
        pod = d["spec"]["template"]
        c = pod["spec"]["containers"][0]
        assert c["image"] == (v.gpu_image if name == "gpu" else v.image)
        assert (c["resources"]["limits"].get("nvidia.com/gpu") == 1) == (name == "gpu")
        assert ("nodeSelector" in pod["spec"]) == (name == "gpu")
        assert c["args"] == compose[f"tfserving-{v.name.replace('.', '-')}"]["command"]  # the same flags
        assert c["resources"]["requests"] == c["resources"]["limits"]  # Guaranteed QoS
        assert pod["metadata"]["labels"]["version"] == v.name
        assert c["startupProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/v1/models/my_model"
        assert "AVAILABLE" in c["readinessProbe"]["exec"]["command"][-1]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert mounts["/config"]["readOnly"]
        assert ("/models/my_model" in mounts) == (name != "uri")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for s in services.values():
        assert {p["name"]: p["port"] for p in s["spec"]["ports"]} == {"grpc": 8500, "http": 8501}
    monitors = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodMonitor"}
    assert set(monitors) == {"tfsb-tfserving", "tfsb-exporter", "tfsb-loadgen"}
    ep = monitors["tfsb-tfserving"]["spec"]["podMetricsEndpoints"][0]
    assert ep["path"] == "/monitoring/prometheus/metrics"
    assert {"sourceLabels": ["__meta_kubernetes_pod_label_version"], "targetLabel": "version",
            "action": "replace"} in ep["relabelings"]
    assert monitors["tfsb-loadgen"]["spec"]["podMetricsEndpoints"][0]["relabelings"][1]["sourceLabels"] == [
        "__meta_kubernetes_pod_label_batch_kubernetes_io_controller_uid"]


def _relabel(target: dict, rules: list) -> dict:
    """Prometheus' `replace` relabeling (the only action the monitors use): regex (.*), separator ;"""
    out = dict(target)
    for r in rules:
        assert r.get("action", "replace") == "replace"
        value = ";".join(out.get(s, "") for s in r.get("sourceLabels", []))
        out[r["targetLabel"]] = r.get("replacement", "$1").replace("$1", value)
    return out


def test_podmonitor_jobs_are_the_jobs_the_rules_alerts_and_dashboards_select(tree):
    """The operator names a PodMonitor's job "<namespace>/<name>" before the user's relabelings run:
    after them, every job the rules, alerts and dashboards select must be one a monitor produces."""
    import re

    _, _, docs = tree
    produced = {}
    for d in docs:
        if d["kind"] != "PodMonitor":
            continue
        operator = {"job": f"{d['metadata']['namespace']}/{d['metadata']['name']}",
                    "__meta_kubernetes_pod_label_version": "2.9"}
        got = _relabel(operator, d["spec"]["podMetricsEndpoints"][0]["relabelings"])
        produced[d["metadata"]["name"]] = got["job"]
    assert produced["tfsb-tfserving"] == "tfserving" and produced["tfsb-exporter"] == "exporter"
    selected = set()
    for f in [*(ROOT / "prometheus").rglob("*.rules.yml"), *(ROOT / "prometheus/alerts").glob("*.yml"),
              *(ROOT / "grafana/dashboards").glob("*.json")]:
        selected |= set(re.findall(r'job=\\?"([\w-]+)', f.read_text()))
    assert selected and selected <= set(produced.values()), (selected, produced)


def test_configs_dashboards_and_rules_are_the_projects_own(tree, tmp_path):
    name, _, docs = tree
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    for f in (ROOT / "monitoring_configs").glob("*.config"):
        if name == "uri" and f.name == "models.config":
            assert 'base_path: "gs://bucket/models/my_model"' in maps["tfserving-config"][f.name]
        else:
            assert maps["tfserving-config"][f.name] == f.read_text()
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"] if name == "uri" else True
    boards = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
    assert len(boards) == 3
    for f in boards:
        assert maps[f"tfsb-dashboard-{f.stem}"] == {f.name: f.read_text()}  # byte-identical after kustomize
    labelled = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert len(labelled) == 3
    # The PrometheusRules hold exactly prometheus/'s files: promtool checks them and runs the rule tests
    rules = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PrometheusRule"}
    files = {"tfsb-recording-rules": "rules/tfserving.rules.yml", "tfsb-alerts": "alerts/tfserving.alerts.yml",
             "tfsb-sla": "rules/sla.rules.yml"}
    assert set(rules) == set(files)
    shutil.copytree(ROOT / "prometheus" / "tests", tmp_path / "tests")
    for rule, f in files.items():
        assert rules[rule] == yaml.safe_load((ROOT / "prometheus" / f).read_text())
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text(yaml.safe_dump(rules[rule]))
    promtool = shutil.which("promtool")
    check = subprocess.run([promtool, "check", "rules", *files.values()], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count("SUCCESS") == 3, check.stdout + check.stderr
    for t in sorted((tmp_path / "tests").glob("*.yml")):
        proc = subprocess.run([promtool, "test", "rules", t.name], cwd=tmp_path / "tests", capture_output=True,
                              text=True)
        assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def test_exporter_rbac_and_loadgen_job(tree):
    _, _, docs = tree
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert ds["hostPID"] and ds["serviceAccountName"] == role["metadata"]["name"]
    job = next(d for d in docs if d["kind"] == "Job")["spec"]
    assert job["completionMode"] == "Indexed" and job["completions"] == job["parallelism"] == 3
    assert job["activeDeadlineSeconds"] > 300  # bounded: it stops by itself
    away = job["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert away[0]["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "tfserving"}
    args = job["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--shard") + 1] == "3" and "2.21=grpc://tfserving-2-21:8500" in args


@pytest.mark.parametrize("args, message", [
    (["--model-base-path", "/models/x"], "MODEL_BASE_PATH must be a gs://, s3:// or hdfs:// URI"),
    (["--cpu", "lots"], "CPU must be a Kubernetes quantity"),
    (["--shards", "0"], "SHARDS must be an integer >= 1 and <= 100"),
    (["--shards", "101"], "SHARDS must be an integer >= 1 and <= 100"),
    (["--release", "Kube_Prom"], "RELEASE must be a Helm release name"),
])
def test_bad_options_say_so_and_write_nothing(tmp_path, args, message):
    proc = make_k8s(tmp_path / "out", *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_of_other_files_is_refused_untouched(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.yaml").write_text("kind: Mine\n")
    proc = make_k8s(tmp_path / "out")
    assert proc.returncode == 2 and "did not write" in proc.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.yaml"]

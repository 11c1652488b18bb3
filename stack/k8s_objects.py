"""The Kubernetes objects of the stack, one function each; stack/k8s.py lays them out as a
kustomize tree. Everything comes from the same sources as docker-compose.yml: the registry's
images, compose's TF Serving flags and readiness check, ports.py, monitoring_configs/."""
from __future__ import annotations

from core import ports
from stack.compose import AVAILABLE_CHECK, EXPORTER_IMAGE, LOADGEN_IMAGE, TFSERVING_FLAGS
from stack.promconfig import SCRAPE_INTERVAL_S, service

PART_OF = {"app.kubernetes.io/part-of": "tfserving-bench"}
VERSION_LABEL = "version"  # what Prometheus keeps as `version` (exporter/kube.py reads it too)
GPU_NODES = {"nvidia.com/gpu.present": "true"}  # set by NVIDIA GPU feature discovery (the GPU Operator)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
INTERVAL = f"{SCRAPE_INTERVAL_S:g}s"
# No root, nothing written outside the emptyDir /tmp, no privilege escalation, no capabilities.
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}
TMP = ({"name": "tmp", "emptyDir": {}}, {"name": "tmp", "mountPath": "/tmp"})


def labels(name: str, **extra) -> dict:
    return {"app.kubernetes.io/name": name, **PART_OF, **extra}


def meta(name: str, lab: dict | None = None, **extra) -> dict:
    return {"name": name, **({"labels": lab} if lab else {}), **extra}


def config_map(name: str, data: dict, lab: dict | None = None, annotations: dict | None = None) -> dict:
    m = meta(name, lab or labels(name))
    if annotations:
        m["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": data}


def tfserving(v, model: str, gpu: bool, resources: dict, model_uri: str | None) -> list:
    """Deployment and Service of one version: the official image with compose's flags, Guaranteed QoS
    (requests == limits: a benchmark wants cores nobody else is given, and the static CPU manager
    pins them), the model from the models PVC (or a gs:// / s3:// base path TF Serving reads)."""
    name, lab = service(v.name), labels("tfserving", **{VERSION_LABEL: v.name})
    limits = dict(resources, **({"nvidia.com/gpu": 1} if gpu else {}))
    status = {"path": f"/v1/models/{model}", "port": "http"}
    volumes, mounts = [{"name": "config", "configMap": {"name": "tfserving-config"}}, TMP[0]], \
        [{"name": "config", "mountPath": "/config", "readOnly": True}, TMP[1]]
    if not model_uri:  # the tree of models/build/: each version's own export (an older TF may not load a newer one's)
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": "tfserving-models", "readOnly": True}})
        mounts.append({"name": "models", "mountPath": f"/models/{model}", "subPath": f"tf{v.name}/{model}",
                       "readOnly": True})
    container = {
        "name": "tfserving", "image": v.gpu_image if gpu else v.image,
        "command": ["/usr/bin/tensorflow_model_server"], "args": list(TFSERVING_FLAGS),
        "env": [{"name": "TF_FORCE_GPU_ALLOW_GROWTH", "value": "true"}, {"name": "TFSB_VERSION", "value": v.name}],
        "ports": [{"name": "grpc", "containerPort": ports.TFSERVING_GRPC},
                  {"name": "http", "containerPort": ports.TFSERVING_REST}],
        "resources": {"requests": dict(limits), "limits": limits},
        # Loading a model can take minutes: the startup probe holds the others off until the server answers.
        "startupProbe": {"httpGet": status, "periodSeconds": 5, "failureThreshold": 120},
        "readinessProbe": {"exec": {"command": list(AVAILABLE_CHECK)}, "periodSeconds": 5, "timeoutSeconds": 3},
        "livenessProbe": {"httpGet": status, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
        "securityContext": CONTAINER_SECURITY, "volumeMounts": mounts,
    }
    spec = {"securityContext": POD_SECURITY, "containers": [container], "volumes": volumes}
    if gpu:
        spec.update(nodeSelector=GPU_NODES, tolerations=[GPU_TOLERATION])
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, lab),
                  "spec": {"replicas": 1, "selector": {"matchLabels": lab},
                           "template": {"metadata": {"labels": lab}, "spec": spec}}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, lab),
           "spec": {"selector": lab, "ports": [
               {"name": "grpc", "port": ports.TFSERVING_GRPC, "targetPort": "grpc", "appProtocol": "grpc"},
               {"name": "http", "port": ports.TFSERVING_REST, "targetPort": "http"}]}}
    return [deployment, svc]


def models_pvc(size: str = "10Gi") -> dict:
    """ReadOnlyMany: every version's pod mounts it, on any node (NFS, Filestore, EFS, CephFS...)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("tfserving-models",
                                                                                   labels("tfserving")),
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": size}}}}


def pod_monitor(name: str, selector: dict, port: str, path: str, release: str, relabel: dict | None = None) -> dict:
    """relabel: {target label: pod label} (the servers' version, the load Job's uid)."""
    endpoint = {"port": port, "path": path, "interval": INTERVAL}
    # The Prometheus Operator names a PodMonitor's job "<namespace>/<PodMonitor name>"; the rules,
    # alerts and dashboards select job="tfserving", "exporter", "loadgen" as the other runtimes
    # name them. User relabelings run after the operator's own, so this one sets the job.
    endpoint["relabelings"] = [{"targetLabel": "job", "replacement": name, "action": "replace"}] + [
        {"sourceLabels": ["__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in pod_label)],
         "targetLabel": target, "action": "replace"} for target, pod_label in (relabel or {}).items()]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": meta(f"tfsb-{name}", {**labels(name), "release": release}),
            "spec": {"selector": {"matchLabels": selector}, "podMetricsEndpoints": [endpoint]}}


def prometheus_rule(name: str, groups: dict, release: str) -> dict:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": meta(name, {**labels("prometheus"), "release": release}), "spec": groups}


def exporter(gpu: bool) -> list:
    """A DaemonSet (on GPU nodes with a GPU) seeing every process of its node (hostPID: NVML names host
    pids), allowed to list the pods of its namespace and nothing else."""
    name, lab = "tfsb-exporter", labels("exporter")
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    if gpu:  # every GPU of the node visible to NVML, without requesting one (it only reads)
        env += [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}]
    container = {"name": "exporter", "image": EXPORTER_IMAGE, "command": ["python3", "-m", "exporter"],
                 "args": ["--bind", "0.0.0.0", "--port", str(ports.EXPORTER), "--state-dir", "/nonexistent",
                          "--docker", "off", "--kube", "on"],
                 "env": env, "ports": [{"name": "metrics", "containerPort": ports.EXPORTER}],
                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                 "readinessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10},
                 "securityContext": CONTAINER_SECURITY, "volumeMounts": [TMP[1]]}
    spec = {"serviceAccountName": name, "hostPID": True, "securityContext": POD_SECURITY,
            "containers": [container], "volumes": [TMP[0]]}
    if gpu:
        spec.update(nodeSelector=GPU_NODES, tolerations=[GPU_TOLERATION])
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, lab)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name, lab),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name, lab),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(name, lab),
         "spec": {"selector": {"matchLabels": lab}, "template": {"metadata": {"labels": lab}, "spec": spec}}},
    ]


def loadgen_job(versions: list, shards: int, rate: float, duration_s: int, protocol: str) -> dict:
    """An Indexed Job: shard i of N sends its slice of the one seeded schedule (loadgen --shard N reads
    JOB_COMPLETION_INDEX); kept off nodes that run a model server, shards spread over nodes. Its summary
    (histograms included) ends its log, so `loadgen merge` works from `kubectl logs` of finished pods."""
    lab = labels("loadgen")
    port = ports.TFSERVING_GRPC if protocol == "grpc" else ports.TFSERVING_REST
    targets = [a for v in versions for a in ("--target", f"{v.name}={protocol}://{service(v.name)}:{port}")]
    container = {"name": "loadgen", "image": LOADGEN_IMAGE, "command": ["python3", "-m", "loadgen"],
                 "args": ["run", *targets, "--mode", "poisson", "--rate", f"{rate:g}", "--duration", f"{duration_s}s",
                          "--shard", str(shards), "--metrics-addr", "0.0.0.0", "--metrics-port", str(ports.LOADGEN),
                          "--linger", f"{3 * SCRAPE_INTERVAL_S:g}", "--run-id", "$(RUN_ID)", "--out",
                          "/tmp/loadgen.json", "--summary-log", "--quiet"],
                 # one run id for every shard of one Job (its uid): Prometheus sums the shards by run_id
                 "env": [{"name": "RUN_ID", "valueFrom": {"fieldRef": {
                     "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}}],
                 "ports": [{"name": "metrics", "containerPort": ports.LOADGEN}],
                 "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                 "securityContext": CONTAINER_SECURITY, "volumeMounts": [TMP[1]]}
    away = {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": "tfserving"}},
            "topologyKey": "kubernetes.io/hostname"}
    spread = {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": lab},
                                                 "topologyKey": "kubernetes.io/hostname"}}
    spec = {"restartPolicy": "Never", "securityContext": POD_SECURITY, "containers": [container],
            "volumes": [TMP[0]], "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [away],
                "preferredDuringSchedulingIgnoredDuringExecution": [spread]}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("tfsb-loadgen", lab),
            "spec": {"completionMode": "Indexed", "completions": shards, "parallelism": shards, "backoffLimit": 0,
                     # bounded: the run, its warm-up and linger, and ten minutes to be scheduled and pull images
                     "activeDeadlineSeconds": duration_s + 600,
                     "template": {"metadata": {"labels": lab}, "spec": spec}}}

#!/usr/bin/env bash
# The exporter against a real NVIDIA GPU, on a machine with no TensorFlow (PyTorch, nvidia-ml-py,
# prometheus-client are enough). One short run; prints what it measured and fails on a broken check:
#   - device metrics present: memory used/total, utilisation, power
#   - a process holding a known amount of GPU memory (PyTorch, 20 GiB) registered as version "gpu-check"
#     through a local-runtime pid file: attributed to that version within 5% of the allocation
#   - a 10 GiB spike held for 0.3 s and freed between two scrapes: caught by the peak sampler
#   - the exporter's own scrape time
# Usage (from the repository root):  bash benchmarks/gpu_check.sh
# A missing psutil (the exporter's only package beyond those) is installed from ./.gpu-wheels when there:
#   pip download -d .gpu-wheels --only-binary=:all: --platform manylinux2014_x86_64 psutil==7.2.2
# on a machine with PyPI, then carry the folder over (it is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PORT=${PORT:-19400}
STATE=$(mktemp -d)
EXPORTER= HOLDER=
trap 'kill $EXPORTER $HOLDER 2>/dev/null || true; rm -rf "$STATE"' EXIT
# Wheels go to a folder of their own: the machine's Python may be externally managed (PEP 668).
export PYTHONPATH="$PWD:$STATE/site"

$PY -c 'import sys; print("python", sys.version.split()[0])'
for mod in psutil prometheus_client pynvml torch; do
  if ! $PY -c "import $mod" 2>/dev/null; then
    # A wheel is a zip: unpacked onto PYTHONPATH it imports, with or without pip on that machine.
    if ls .gpu-wheels/"$mod"-*.whl >/dev/null 2>&1; then
      $PY -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' .gpu-wheels/"$mod"-*.whl "$STATE/site"
    else echo "gpu_check: python module $mod is missing (see the header for .gpu-wheels)"; exit 2; fi
  fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# A process that holds 20 GiB, then (on SIGUSR1) spikes 10 GiB more for 0.3 s; registered as a model server.
$PY - "$STATE" <<'EOF' &
import os, signal, sys, time, torch
state = sys.argv[1]
GiB = 1 << 30
hold = torch.empty(20 * GiB, dtype=torch.uint8, device="cuda"); hold.fill_(1); torch.cuda.synchronize()
def spike(*_):
    extra = torch.empty(10 * GiB, dtype=torch.uint8, device="cuda"); extra.fill_(2); torch.cuda.synchronize()
    time.sleep(0.3); del extra; torch.cuda.empty_cache()
signal.signal(signal.SIGUSR1, spike)
d = os.path.join(state, "tfgpu-check"); os.makedirs(d)
start = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]
open(os.path.join(d, "modelserver.pid"), "w").write(f"{os.getpid()} {start}\n")
print("holder ready", flush=True)
time.sleep(120)
EOF
HOLDER=$!
for _ in $(seq 120); do [ -f "$STATE/tfgpu-check/modelserver.pid" ] && break; sleep 0.5; done

$PY -m exporter --port "$PORT" --state-dir "$STATE" --docker off --sample-interval 0.05 &
EXPORTER=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null && break; sleep 0.5; done

$PY - "$PORT" "$HOLDER" <<'EOF'
import os, signal, sys, time, urllib.request
from prometheus_client.parser import text_string_to_metric_families
port, holder = sys.argv[1], int(sys.argv[2])
GiB = 1 << 30
def scrape():
    t0 = time.perf_counter()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    ms = (time.perf_counter() - t0) * 1000
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    return fams, ms
def samples(fams, name, **labels):
    f = fams.get(name)
    return [s.value for s in (f.samples if f else []) if all(s.labels.get(k) == v for k, v in labels.items())]
time.sleep(2.5)  # attribution rescans pid files every second
fams, ms = scrape()
failed = []
def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failed.append(what)
check(samples(fams, "gpu_up") == [1.0], "gpu_up is 1 (NVML answers)")
for name in ("gpu_memory_used_bytes", "gpu_memory_total_bytes", "gpu_utilization_ratio", "gpu_power_watts"):
    v = samples(fams, name)
    check(bool(v), f"{name}: {', '.join(f'{x:.4g}' for x in v)}")
mine = sum(samples(fams, "process_gpu_memory_used_bytes", version="gpu-check"))
check(abs(mine - 20 * GiB) <= 0.05 * 20 * GiB,
      f"version gpu-check holds {mine / GiB:.2f} GiB for a 20 GiB allocation (within 5%)")
before = max(samples(fams, "gpu_memory_used_bytes") or [0])
os.kill(holder, signal.SIGUSR1)
time.sleep(1.5)  # the spike came and went between two scrapes
fams, ms2 = scrape()
peak = max(samples(fams, "gpu_memory_used_peak_bytes") or [0])
now = max(samples(fams, "gpu_memory_used_bytes") or [0])
check(peak >= before + 9 * GiB, f"peak sampler caught the 0.3 s spike: peak {peak / GiB:.2f} GiB, "
      f"before {before / GiB:.2f}, now {now / GiB:.2f}")
collect = samples(fams, "exporter_collect_duration_seconds")
check(max(ms, ms2) < 100, f"scrape took {ms:.1f} / {ms2:.1f} ms (collect {', '.join(f'{c * 1000:.1f}' for c in collect)} ms)")
print("gpu_check: " + ("PASS" if not failed else f"FAIL ({len(failed)} checks)"))
sys.exit(1 if failed else 0)
EOF

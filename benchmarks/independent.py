"""Independent clients to hold the load generator against: wrk (C, REST) and NVIDIA Triton's
perf_analyzer (C++, gRPC with --service-kind=tfserving).

perf_analyzer comes from the tritonclient wheel on PyPI (2.60.0) and needs glibc 2.38, newer than
bookworm's, so it runs inside a Debian trixie root made with debootstrap (root only, ~230 MB,
cached under ~/.cache/tfserving-bench/trixie-root). To reproduce by hand:

    debootstrap --variant=minbase trixie /tmp/trixie http://deb.debian.org/debian
    pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 tritonclient==2.60.0
    unzip -j tritonclient-2.60.0-*.whl 'tritonclient-2.60.0.data/data/bin/perf_analyzer' -d /tmp/trixie/usr/local/bin
    chroot /tmp/trixie perf_analyzer -m my_model --service-kind=tfserving -i grpc -u 127.0.0.1:8500 \\
        --concurrency-range 1 -b 1 --input-data zero
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from benchmarks.common import pin

CACHE = Path(os.environ.get("TFSB_HOME") or Path.home() / ".cache" / "tfserving-bench")
ROOTFS = CACHE / "trixie-root"
TRITONCLIENT = "tritonclient==2.60.0"


def perf_analyzer_ready(log=print) -> str:
    """"" when perf_analyzer can run, else why not (the benchmark then says so and skips it)."""
    binary = ROOTFS / "usr" / "local" / "bin" / "perf_analyzer"
    if binary.exists():
        return ""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        return "perf_analyzer needs root and debootstrap (a trixie root for its glibc 2.38)"
    if not (ROOTFS / "usr" / "bin").exists():
        log("building a Debian trixie root for perf_analyzer (debootstrap, a few minutes, cached) ...")
        tmp = ROOTFS.with_name("trixie-root.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(["debootstrap", "--variant=minbase", "trixie", str(tmp),
                               "http://deb.debian.org/debian"], capture_output=True, text=True)
        if proc.returncode != 0:
            return f"debootstrap trixie failed: {proc.stderr.strip().splitlines()[-1:]}"
        tmp.rename(ROOTFS)
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(["pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--platform",
                               "manylinux2014_x86_64", "-d", d, TRITONCLIENT], capture_output=True, text=True)
        wheels = list(Path(d).glob("tritonclient-*.whl"))
        if proc.returncode != 0 or not wheels:
            return f"pip download {TRITONCLIENT} failed: {proc.stderr.strip()[-200:]}"
        with zipfile.ZipFile(wheels[0]) as z:
            member = next(n for n in z.namelist() if n.endswith("/bin/perf_analyzer"))
            binary.parent.mkdir(parents=True, exist_ok=True)
            binary.write_bytes(z.read(member))
    binary.chmod(0o755)
    return ""


def perf_analyzer(port: int, concurrency: int, rows: int = 1, seconds: int = 5) -> dict:
    """{"qps", "p50_ms", "p99_ms"} of perf_analyzer's gRPC run against a TF Serving API."""
    out = subprocess.run(pin(1) + ["chroot", str(ROOTFS), "/usr/local/bin/perf_analyzer", "-m", "my_model",
                                   "--service-kind=tfserving", "-i", "grpc", "-u", f"127.0.0.1:{port}",
                                   "--concurrency-range", str(concurrency), "-b", str(rows), "--input-data", "zero",
                                   "--measurement-interval", str(seconds * 1000)],
                         capture_output=True, text=True, timeout=seconds * 20 + 60).stdout
    qps = re.search(r"Throughput: ([\d.]+) infer/sec", out)
    if not qps:
        raise RuntimeError(f"perf_analyzer printed no throughput: {out[-500:]}")
    us = {k: float(re.search(rf"{k} latency: (\d+) usec", out).group(1)) for k in ("p50", "p99")}
    return {"qps": float(qps.group(1)) / rows, "p50_ms": us["p50"] / 1000, "p99_ms": us["p99"] / 1000}


def wrk(url: str, body_file: Path, concurrency: int, seconds: int = 5) -> dict:
    """{"qps", "p50_ms", "p99_ms"} of wrk posting body_file (one thread, pinned to the client core)."""
    script = Path(tempfile.mkdtemp()) / "post.lua"
    script.write_text(f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
    out = subprocess.run(pin(1) + ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--latency", "-s", str(script),
                                   url], capture_output=True, text=True).stdout

    def ms(label: str) -> float:
        m = re.search(rf"{label}%\s+([\d.]+)(us|ms|s)\b", out)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    return {"qps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "p50_ms": ms("50"), "p99_ms": ms("99")}

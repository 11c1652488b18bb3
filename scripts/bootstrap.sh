#!/usr/bin/env bash
# Install what the project needs on a fresh machine, idempotently:
# Debian packages (when root on Debian), uv, and the tooling venv (.venv, from uv.lock).
set -euo pipefail
cd "$(dirname "$0")/.."

# docker.io, docker-compose, debootstrap: the docker runtime and its offline test (images built here).
APT_PACKAGES=(prometheus nginx-light wrk hey chromium docker.io docker-compose debootstrap libjemalloc2 libtcmalloc-minimal4)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# kubectl (its built-in kustomize) checks the Kubernetes manifests offline; any kubectl will do.
command -v kubectl >/dev/null || missing+=(kubernetes-client)
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: please install: ${missing[*]} (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
  fi
fi
# A systemd-less machine still gets the prometheus package's own service started by
# the postinst on some hosts; the stack runs its own Prometheus, so stop that one.
if command -v systemctl >/dev/null && systemctl is-active -q prometheus 2>/dev/null; then
  systemctl stop prometheus prometheus-node-exporter 2>/dev/null || true
fi

if ! command -v uv >/dev/null; then
  echo "bootstrap: installing uv"
  python3 -m pip install -q uv 2>/dev/null || python3 -m pip install -q --user uv
  export PATH="$HOME/.local/bin:$PATH"
fi

# The tooling venv runs on Python 3.11: pyenv's where present, else uv finds or installs one.
PY311=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11.*/bin/python3.11 2>/dev/null | tail -1 || true)
# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (this machine's default), Python never caches
# bytecode, and each `python -m analysis` would compile scipy and matplotlib again (their imports: 3.9 s -> 1.4 s).
uv sync --frozen -q --compile-bytecode -p "${PY311:-3.11}"
touch .venv/.synced

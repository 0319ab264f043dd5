#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine with Python 3.11:
#   - Debian packages the tests need (prometheus + promtool, chromium + chromedriver), when run as root
#     or with sudo, and only when missing;
#   - a virtualenv in .venv with capplan and the pinned dependencies (requirements.lock as constraints).
# Usage: bash scripts/setup.sh [core|test|bench]   (core: just what `capplan plan` needs; bench: core plus
#   statsforecast for the AutoETS peer in `capplan backtest` and the accuracy benchmark; test: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-core}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

if [ "$MODE" = "test" ]; then
  need=()
  command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
  # `kubectl kustomize deploy/` (tests/test_deploy.py): Debian's kubectl, with kustomize built in
  command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
  if [ "${#need[@]}" -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing Debian packages: ${need[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # the Debian package starts a system Prometheus on :9090; the tests start their own on free ports
    (command -v systemctl >/dev/null 2>&1 && $SUDO systemctl stop prometheus victoria-metrics 2>/dev/null) || true
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)" >&2
  if ! "$PY" -m venv .venv 2>/dev/null; then
    # Debian's python3.11 needs the venv module (python3.11-venv) for this
    rm -rf .venv
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3.11-venv >/dev/null
    "$PY" -m venv .venv
  fi
fi
.venv/bin/python -m pip install -q --upgrade "pip>=24" >&2
# what this mode installs, said as it is (core never installs Airflow)
setup_message() {
  case "$1" in
    test) echo "setup: installing capplan[test,airflow] (the first run downloads TensorFlow, Prophet and Airflow: a few minutes)" ;;
    *) echo "setup: installing capplan (the first run downloads TensorFlow and Prophet: a few minutes)" ;;
  esac
}
extras=""
[ "$MODE" = "test" ] && extras="[test,airflow]"
setup_message "$MODE" >&2
.venv/bin/python -m pip install -q -c requirements.lock -c airflow_dags/requirements-airflow.lock -e ".${extras}" >&2
if [ "$MODE" = "test" ] || [ "$MODE" = "bench" ]; then
  # the AutoETS peer of `capplan backtest` (README "Results on the embedded sample"): statsforecast and fugue declare
  # pandas<3, yet AutoETS runs on numpy arrays and works with pandas 3, so these pinned packages go in
  # without their declared dependencies (everything else they import is already a core dependency)
  echo "setup: installing the bench dependencies (statsforecast)" >&2
  .venv/bin/python -m pip install -q --no-deps -c requirements.lock \
    statsforecast coreforecast utilsforecast fugue triad adagio fsspec >&2
fi

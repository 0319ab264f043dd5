#!/usr/bin/env bash
# README command 1: set up what `capplan plan` needs (core: no Airflow, no test tools), then run the
# main job on the embedded real sample.
# Extra arguments go to `capplan plan` (e.g. --format json, --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh core
exec .venv/bin/capplan plan "$@"

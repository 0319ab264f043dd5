#!/usr/bin/env bash
# README command 1: set everything up, then run the main job on the embedded real sample.
# Extra arguments go to `capplan plan` (e.g. --format json, --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh core
exec .venv/bin/capplan plan "$@"

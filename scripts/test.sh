#!/usr/bin/env bash
# README command 2: set everything up (Debian packages, venv), then run the whole test suite.
# Tests that need Prometheus, Chromium or Airflow start them themselves; with CI=true they fail, never skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest "$@"

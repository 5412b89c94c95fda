#!/usr/bin/env bash
# CI: install HAL with the oldest supported pip into a fresh virtualenv (pinned by
# requirements.lock as constraints, so it is quick and repeatable), then import every
# module and run the pre-fetch extraction from outside the source tree.
# Usage: scripts/check_install.sh   (HAL_CHECK_PIP=23.0.1 and HAL_CHECK_PYTHON=python3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD"
pip_version="${HAL_CHECK_PIP:-23.0.1}"
python="${HAL_CHECK_PYTHON:-python3.11}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "pip==$pip_version"
"$work/venv/bin/python" -m pip --version
# A copy of the tree, so the build writes nothing into the worktree (build/, *.egg-info).
git ls-files -z | (cd "$src" && xargs -0 tar -cf -) | (mkdir "$work/src" && tar -xf - -C "$work/src")
echo "$(date +%T) installing HAL"
"$work/venv/bin/python" -m pip install -q --prefer-binary -c "$src/requirements.lock" "$work/src"
echo "$(date +%T) importing"
cd "$work"
"$work/venv/bin/python" "$src/scripts/check_install.py"

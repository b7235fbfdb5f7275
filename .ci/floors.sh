#!/usr/bin/env bash
# Floors job (run by hand when a floor in pyproject.toml changes; too long for .ci/run):
# install fuzzpy with every dependency at the lowest version pyproject.toml allows
# (.ci/floors.txt) on the oldest supported Python, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.10
pyenv_root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
py=$(ls -d "$pyenv_root/versions/$version".*/ 2>/dev/null | grep -E "/$version\.[0-9]+/$" | sort -V | tail -n 1 || true)
if [ -z "$py" ] || [ ! -x "${py}bin/python" ]; then
  echo "floors: no Python $version found under $pyenv_root/versions (install it with: pyenv install $version)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzzpy-floors.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${py}bin/python" -m venv "$work/venv"
echo "+ Python $version: pip install -c .ci/floors.txt -e .[test]"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check -c .ci/floors.txt -e ".[test]"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider

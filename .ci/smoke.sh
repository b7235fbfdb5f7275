#!/usr/bin/env bash
# Smoke job: fuzzpy as a new user installs it.  Build one wheel, then on the oldest and the
# newest supported Python (from pyenv) install it into a fresh virtual environment (a
# non-editable install, with the newest dependencies each Python resolves to) and run
# .ci/smoke.py with it: every example checked and run, JSON and SARIF parsed strictly, one
# language-server round trip with strict framing.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
versions=("3.10" "3.13")

pyenv_root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
find_python() {  # newest installed patch release of $1 under pyenv, or nothing
  local found
  found=$(ls -d "$pyenv_root/versions/$1".*/ 2>/dev/null | grep -E "/$1\.[0-9]+/$" | sort -V | tail -n 1 || true)
  if [ -n "$found" ] && [ -x "${found}bin/python" ]; then echo "${found}bin/python"; fi
}

pythons=()
for v in "${versions[@]}"; do
  py=$(find_python "$v")
  if [ -z "$py" ]; then
    echo "smoke: no Python $v found under $pyenv_root/versions (install it with: pyenv install $v)" >&2
    exit 1
  fi
  pythons+=("$py")
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fuzzpy-ci.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "+ building the wheel"
had_build=$([ -e "$repo/build" ] && echo yes || echo no)
"${pythons[0]}" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$repo"
wheel=$(ls "$work"/dist/fuzzpy-*.whl)
if [ "$had_build" = no ]; then rm -rf "$repo/build"; fi  # pip's in-tree build leaves it

for i in "${!versions[@]}"; do
  v=${versions[$i]}
  py=${pythons[$i]}
  venv="$work/venv-$v"
  echo "+ Python $v ($py): fresh virtual environment, pip install $(basename "$wheel")"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
  "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
    | grep -iE '^(pulp|highspy|typer|click|pandas|numpy|pyarrow|pygls|lsprotocol|sympy|scipy|lark) ' \
    | tr -s ' ' | paste -sd ',' | sed 's/^/  resolved: /' || true
  PATH="$venv/bin:$PATH" "$venv/bin/python" "$repo/.ci/smoke.py" --repo "$repo"
done
echo "smoke: passed on Python ${versions[*]}"

#!/usr/bin/env bash
# Makes (once) a Python venv under .build/ holding exact pins, and prints its
# python's path. CI machines have Python 3 and pip but no NumPy or any other
# package system-wide: every Python step the Makefile runs goes through a venv
# made here, so a fresh clone needs nothing installed by hand.
#
#   scripts/py-venv.sh NAME PKG==VER...     e.g. scripts/py-venv.sh emu numpy==2.3.5
#
# The venv is rebuilt when the pin list changes (a stamp file records it), or
# when the checkout has moved: pip's console scripts (envoy, …) name the
# venv's python by its absolute path, so a moved .build/ keeps a python that
# runs and scripts that do not.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NAME PKG==VER..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
shift
for pin in "$@"; do
	[[ $pin == *==* ]] || { echo "py-venv: $pin is not an exact pin (PKG==VER)" >&2; exit 2; }
done
venv="$root/.build/py-$name"
stamp="$venv/.pins"
want=$(printf '%s\n' "$venv" "$@")
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	rm -rf "$venv"
	python3 -m venv "$venv" >&2
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
	printf '%s\n' "$want" >"$stamp"
fi
echo "$venv/bin/python"

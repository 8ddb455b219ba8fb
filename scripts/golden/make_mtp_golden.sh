#!/usr/bin/env bash
# The Qwen3.5 MTP head goldens (testdata/golden/tiny/*mtp*.json) of models'
# TestQwen35MTPLlamaCpp: llama.cpp v0.5.0's draft-mtp context on the tiny
# models that test writes, through scripts/llamacpp/mtp_logits.cpp, built
# against the libllama that `scripts/llamacpp/build-newest.sh golden` builds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/.build/llamacpp-newest
OUT=$ROOT/.build/tiny-models-mtp
"$ROOT/scripts/llamacpp/build-newest.sh" golden
c++ -O2 -std=c++17 -I"$B/src/include" -I"$B/src/ggml/include" "$ROOT/scripts/llamacpp/mtp_logits.cpp" \
	-L"$B/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$B/build/bin" -o "$B/mtp-logits"
rm -rf "$OUT" && mkdir -p "$OUT"
(cd "$ROOT" && go test ./models -run '^TestQwen35MTPLlamaCpp$' -count=1 -tiny-out "$OUT")
# The prompt is models' qwen35MTPPrompt; 20 generated tokens, 4 chained drafts.
PROMPT="1 17 42 99 3 250 250 7 120 64 33 5"
for f in "$OUT"/*.gguf; do
	name=$(basename "$f" .gguf)
	sum=$(sha256sum "$f" | cut -d' ' -f1)
	# shellcheck disable=SC2086
	"$B/mtp-logits" "$f" 20 4 $PROMPT |
		python3 -c 'import json,sys; g=json.load(sys.stdin); g["model_sha256"]=sys.argv[1]; json.dump(g, open(sys.argv[2], "w"))' \
			"$sum" "$ROOT/testdata/golden/tiny/$name.json"
	echo "wrote testdata/golden/tiny/$name.json" >&2
done

#!/usr/bin/env python3
"""Runs llama.cpp v0.5.0 (scripts/llamacpp/build-newest.sh golden builds
.build/llamacpp-newest/tiny-logits) on the tiny random-weight models of the
architectures the older reference lacks, which
`go test ./models -run TestTinyNewest -tiny-out DIR` writes, and stores its
logits for every position of a fixed prompt and of the 64 tokens it then
picks greedily, one JSON file per model, for TestTinyNewest to compare.

    make_tiny_golden_newest.py TOOL DIR OUT

Standard library only: the tool prints the logits, no bindings are needed.
"""

import hashlib
import json
import pathlib
import subprocess
import sys

# The prompt make_tiny_golden.py uses (modeltest's tiny BPE ids).
TOKENS = [1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44]
GEN = 64


def run(tool, model):
    out = subprocess.run([tool, str(model), str(GEN)] + [str(t) for t in TOKENS],
                         check=True, capture_output=True, text=True).stdout
    tokens, logits = [], []
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "tok":
            tokens.append(int(rest))
        elif kind == "logits":
            logits.append([round(float(x), 5) for x in rest.split()])
    if len(tokens) != len(TOKENS) + GEN or len(logits) != len(tokens):
        raise SystemExit(f"{model}: {len(tokens)} tokens, {len(logits)} logit rows")
    return tokens, logits


def main():
    tool, src, out = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for model in sorted(src.glob("*.gguf")):
        tokens, logits = run(tool, model)
        doc = {
            "generator": "scripts/golden/make_tiny_golden_newest.py (llama.cpp v0.5.0 de3ff81, node-llama-cpp 3.22.1)",
            "model": model.name,
            "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "prompt_len": len(TOKENS),
            "tokens": tokens,
            "logits": logits,
        }
        path = out / (model.stem + ".json")
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

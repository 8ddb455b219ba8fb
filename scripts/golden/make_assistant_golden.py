#!/usr/bin/env python3
"""Runs llama.cpp v0.5.0's Gemma 4 assistant beside its tiny target
(assistant_logits.cpp, built like tiny-logits by
scripts/llamacpp/build-newest.sh golden or by hand:
c++ -O2 -std=c++17 -I$SRC/include -I$SRC/ggml/include -I$SRC/src
scripts/llamacpp/assistant_logits.cpp -L$BUILD/bin -lllama -lggml -lggml-base
-Wl,-rpath,$BUILD/bin -o .build/llamacpp-newest/assistant-logits) on the
files `go test ./models -run TestGemma4AssistantGolden -tiny-out DIR` writes,
and stores every draft row's logits for TestGemma4AssistantGolden, one
JSON file per pair (NAME-target.gguf beside NAME.gguf).

    make_assistant_golden.py TOOL DIR OUT

Standard library only.
"""

import hashlib
import json
import pathlib
import subprocess
import sys

# make_tiny_golden.py's prompt (modeltest's tiny BPE ids).
TOKENS = [1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44]
GEN = 12
DRAFT = 3


def golden(tool, target, assistant):
    text = subprocess.run([tool, str(target), str(assistant), str(GEN), str(DRAFT)] + [str(t) for t in TOKENS],
                          check=True, capture_output=True, text=True).stdout
    tokens, drafts, last = [], [], None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "tok":
            tokens.append(int(rest))
            last = None
        elif kind == "draft":
            pos, tok = rest.split()
            last = {"pos": int(pos), "token": int(tok)}
            drafts.append(last)
        elif kind == "logits" and last is not None:
            last["logits"] = [round(float(x), 5) for x in rest.split()]
    if len(tokens) != len(TOKENS) + GEN or len(drafts) != GEN * DRAFT or any("logits" not in d for d in drafts):
        raise SystemExit(f"{assistant}: {len(tokens)} tokens, {len(drafts)} drafts")
    return {
        "generator": "scripts/golden/make_assistant_golden.py (llama.cpp v0.5.0 de3ff81, node-llama-cpp 3.22.1)",
        "target_sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "assistant_sha256": hashlib.sha256(assistant.read_bytes()).hexdigest(),
        "prompt_len": len(TOKENS),
        "n_draft": DRAFT,
        "tokens": tokens,
        "drafts": drafts,
    }


def main():
    tool, src, out = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for target in sorted(src.glob("*-target.gguf")):
        name = target.name[: -len("-target.gguf")]
        doc = golden(tool, target, src / (name + ".gguf"))
        path = out / (name + ".json")
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs llama.cpp on the tiny random-weight models that
`go test ./models -run TestTinyLlamaCpp -tiny-out DIR` writes, and stores
its logits for every position of a fixed token sequence, one JSON file per
model, for TestTinyLlamaCpp to compare against.

    make_tiny_golden.py DIR OUT
"""

import hashlib
import json
import pathlib
import sys

import numpy as np
from llama_cpp import Llama

# Token ids only (the models' vocabulary is modeltest's tiny BPE): 20
# positions, repeats included, fed as one batch.
TOKENS = [1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44]


def main():
    src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for model in sorted(src.glob("*.gguf")):
        llm = Llama(model_path=str(model), n_ctx=64, n_batch=64, n_ubatch=64, n_threads=1,
                    logits_all=True, flash_attn=False, verbose=False)
        llm.eval(TOKENS)
        logits = np.array(llm.scores[: len(TOKENS)])
        doc = {
            "generator": "scripts/golden/make_tiny_golden.py (llama.cpp 0c1e57098, llama-cpp-python 0.3.36)",
            "model": model.name,
            "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "tokens": TOKENS,
            "logits": [[round(float(x), 5) for x in row] for row in logits],
        }
        path = out / (model.stem + ".json")
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {path}", file=sys.stderr)
        del llm


if __name__ == "__main__":
    main()

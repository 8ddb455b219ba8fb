#!/usr/bin/env python3
"""Writes llama.cpp golden data for Sluice's correctness tests.

Runs llama.cpp (through the llama_cpp bindings that scripts/llamacpp/build.sh
sets up in .build/venv) on a GGUF model and writes two JSON files:

  <out>/<name>.json           per prompt: prompt ids, 32 greedy ids, top-5
                              logits at prompt positions and at every
                              generation step, top-2 margin at every step
  <out>/<name>-tokenize.json  tokenizer-only cases: text -> ids, with and
                              without special-token parsing

Conventions (also written into the files' headers):
  - Generation step k's logits are those after feeding the prompt and
    greedy_ids[:k]; greedy_ids[k] is their argmax. Step 0's logits are the
    last prompt position's.
  - Generation does not stop at end-of-generation tokens: all 32 steps are
    recorded so the forward pass is compared everywhere.
  - The prompt is evaluated in batches of n_batch tokens, then one token per
    decode step, with logits for every position (logits_all).

Run it through scripts/golden/run.sh, which builds llama.cpp first.
"""

import argparse
import ctypes
import hashlib
import json
import os
import pathlib
import sys

import numpy as np

import llama_cpp
from llama_cpp import Llama

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from prompts import PROMPTS, TOKENIZE  # noqa: E402

# llama.cpp commit vendored in llama-cpp-python 0.3.36 (its CHANGELOG).
LLAMA_CPP_COMMIT = "0c1e57098"

N_GEN = 32
N_CTX = 4096
N_BATCH = 512
# One thread by default: on the shared 2-core dev machine two ggml threads
# spin at every barrier while the other is descheduled, 20x slower. CPU matmul
# splits work by rows, so the thread count does not change the sums (check
# with --threads 2 --only NAME).
N_THREADS = 1
SEED = 1234
TOP_K = 5


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ggml_build_info():
    """ggml's version and commit as the built library reports them."""
    lib = pathlib.Path(llama_cpp.llama_cpp._base_path) / "libggml-base.so"
    try:
        ggml = ctypes.CDLL(str(lib))
        ggml.ggml_version.restype = ctypes.c_char_p
        ggml.ggml_commit.restype = ctypes.c_char_p
        return ggml.ggml_version().decode(), ggml.ggml_commit().decode()
    except (OSError, AttributeError):
        return "unknown", "unknown"


def top_k(row, k=TOP_K):
    """The k largest logits of row as [[id, logit], ...], largest first; ties
    broken by lower id, as argmax does."""
    idx = np.argpartition(-row, k)[:k]
    idx = sorted(idx.tolist(), key=lambda i: (-row[i], i))
    return [[int(i), round(float(row[i]), 5)] for i in idx]


def margin(row):
    two = np.partition(row, -2)[-2:]
    return round(float(two[1] - two[0]), 6)


def prompt_positions(n):
    """Prompt positions whose logits are recorded: first, quarters, last."""
    return sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1})


def run_prompt(llm, name, text, add_bos):
    ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
    if len(ids) + N_GEN > llm.n_ctx():
        raise ValueError(f"{name}: {len(ids)} prompt tokens do not fit n_ctx {llm.n_ctx()}")
    llm.reset()
    llm.eval(ids)
    scores = llm.scores  # [n_ctx, n_vocab], rows filled up to llm.n_tokens
    logits = [{"pos": p, "top5": top_k(scores[p])} for p in prompt_positions(len(ids))]
    greedy, margins = [], []
    for step in range(N_GEN):
        row = scores[llm.n_tokens - 1]
        tok = int(np.argmax(row))
        logits.append({"step": step, "top5": top_k(row)})
        margins.append(margin(row))
        greedy.append(tok)
        if step < N_GEN - 1:
            llm.eval([tok])
    completion = llm.detokenize(greedy, prev_tokens=ids, special=True).decode("utf-8", errors="replace")
    return {
        "name": name,
        "prompt": text,
        "add_bos": add_bos,
        "n_prompt": len(ids),
        "prompt_ids": ids,
        "greedy_ids": greedy,
        "completion": completion,
        "top2_margin": margins,
        "min_margin": min(margins),
        "logits": logits,
    }


def tokenize_cases(llm):
    cases = []
    for name, text in TOKENIZE:
        raw = text.encode("utf-8")
        special = llm.tokenize(raw, add_bos=False, special=True)
        plain = llm.tokenize(raw, add_bos=False, special=False)
        back = llm.detokenize(plain).decode("utf-8", errors="replace")
        cases.append({
            "name": name,
            "text": text,
            "ids": special,
            "ids_no_special": plain,
            "roundtrip": back == text,
        })
    return cases


def compact_json(obj, indent=0):
    """JSON with one line per innermost object or list of scalars, so the file
    stays small but diffs stay readable."""
    pad = " " * indent

    def flat(x):
        return json.dumps(x, ensure_ascii=False, separators=(",", ":"))

    def scalar(x):
        return not isinstance(x, (dict, list))

    def is_leafy(x):
        if isinstance(x, list):
            return all(scalar(e) or (isinstance(e, list) and all(map(scalar, e))) for e in x)
        if isinstance(x, dict):
            return len(x) <= 6 and all(scalar(v) or is_leafy(v) for v in x.values())
        return True

    if isinstance(obj, dict) and not is_leafy(obj):
        items = [f"{pad} {json.dumps(k)}: {compact_json(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and not is_leafy(obj):
        items = [pad + " " + compact_json(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return flat(obj)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--name", required=True, help="base name of the output files")
    ap.add_argument("--command", default=" ".join(sys.argv), help="command line to record")
    ap.add_argument("--threads", type=int, default=N_THREADS, help="llama.cpp threads")
    ap.add_argument("--only", default="", help="comma-separated prompt names (default all)")
    # logits_all keeps n_ctx x n_vocab floats twice (llama.cpp's and the
    # bindings' copy): 8.6 GB for Gemma 3's 262,144-token vocabulary at 4096.
    ap.add_argument("--n-ctx", type=int, default=N_CTX, help="context size (the longest prompt + n_gen must fit)")
    args = ap.parse_args()

    llm = Llama(
        model_path=args.model,
        n_ctx=args.n_ctx,
        n_batch=N_BATCH,
        n_ubatch=N_BATCH,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        seed=SEED,
        logits_all=True,
        flash_attn=False,
        verbose=False,
    )
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    ggml_version, ggml_commit = ggml_build_info()
    model = pathlib.Path(args.model)
    header = {
        "generator": "scripts/golden/make_golden.py",
        "command": args.command,
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "ggml_version": ggml_version,
        "ggml_commit": ggml_commit,
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "model": model.name,
        "model_sha256": sha256(model),
        "n_vocab": llm.n_vocab(),
        "bos_id": int(llama_cpp.llama_vocab_bos(vocab)),
        "eos_id": int(llama_cpp.llama_vocab_eos(vocab)),
        "eot_id": int(llama_cpp.llama_vocab_eot(vocab)),
        "add_bos": add_bos,
    }

    tok = dict(header)
    tok["conventions"] = (
        "ids: llama_tokenize(text, add_special=false, parse_special=true); "
        "ids_no_special: same with parse_special=false; prepend bos_id when add_bos. "
        "roundtrip: detokenize(ids_no_special) == text."
    )
    tok["cases"] = tokenize_cases(llm)

    gold = dict(header)
    gold["params"] = {
        "n_ctx": args.n_ctx, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": args.threads,
        "seed": SEED, "logits_all": True, "flash_attn": False, "type_k": "f16", "type_v": "f16",
        "n_gen": N_GEN, "sampling": "greedy (argmax, temperature 0)",
    }
    gold["conventions"] = (
        "prompt_ids: llama_tokenize(prompt, add_special=add_bos, parse_special=true). "
        "logits entries with pos: top-5 [id, logit] after prompt position pos. "
        "logits entries with step k: top-5 after feeding the prompt and greedy_ids[:k] "
        "(step 0 = last prompt position); greedy_ids[k] is its argmax. "
        "top2_margin[k]: top-1 minus top-2 logit at step k. "
        "Generation does not stop at eos/eot: all n_gen steps are recorded. "
        "Prompt evaluated in n_batch chunks, then one token per decode."
    )
    gold["cases"] = []
    only = set(filter(None, args.only.split(",")))
    for name, text in PROMPTS:
        if only and name not in only:
            continue
        case = run_prompt(llm, name, text, add_bos)
        print(f"{name}: {case['n_prompt']} prompt tokens, min margin {case['min_margin']:.4f}: "
              f"{case['completion'][:60]!r}", file=sys.stderr)
        gold["cases"].append(case)
    if not only and max(c["n_prompt"] for c in gold["cases"]) < 1000:
        raise SystemExit("no prompt of 1,000+ tokens: lengthen long_text")

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path, obj in ((out / f"{args.name}.json", gold), (out / f"{args.name}-tokenize.json", tok)):
        path.write_text(compact_json(obj) + "\n", encoding="utf-8")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

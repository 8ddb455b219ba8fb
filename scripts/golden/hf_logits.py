#!/usr/bin/env python3
"""Runs Hugging Face transformers (CPU PyTorch, float32, eager attention) on
the tiny random-weight safetensors checkpoints that
`go test ./models -run TestHFReference -hf-out DIR` writes, and stores, per
model, the full logits at each prompt's last position and the top-k logits
at every position, for TestHFReference to compare Sluice's forward against.

    hf_logits.py DIR OUT

Each DIR/NAME/ holds config.json and model.safetensors; OUT/NAME.json is
written with the sha256 of both, so the Go test can tell when modeltest
writes a different model than the one transformers ran (make golden-hf).
"""

import hashlib
import json
import pathlib
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

# Token ids only (modeltest's tiny vocabulary has 300). One prompt of one
# token, the tiny llama.cpp goldens' 20, a repeated token, and 48 ids: longer
# than every sliding window in the reference set (5 and 6 tokens), than
# Sluice's test prefill chunk and than phi3-longrope's original context (32:
# transformers takes the long LongRoPE factors for it alone), so window
# masks, chunked prefill and both factor sets are exercised.
PROMPTS = [
    [1],
    [1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44],
    [77] * 10,
    [1] + [(7 * i * i + 13 * i + 5) % 300 for i in range(1, 48)],
]
TOPK = 5
HASHED = ("config.json", "model.safetensors")


def r(x):
    return round(float(x), 6)


def q8_0(x):
    """x rounded as ggml's quantize_row_q8_0: blocks of 32 to int8 under a
    float16 scale of the block's largest magnitude / 127."""
    b = x.reshape(-1, 32)
    d = (b.abs().amax(-1, keepdim=True) / 127).half().float()
    q = torch.where(d > 0, torch.round(b / torch.where(d > 0, d, torch.ones_like(d))), torch.zeros_like(b))
    return (q * d).reshape(x.shape)


def q8_expert_shift(model, runs):
    """How far the logits move with gpt-oss's expert inputs (the hidden
    state and the gated activation before down_proj) rounded to Q8_0, as
    Sluice's (and ggml's) MXFP4 kernels round the activations they dot the
    weights with: the scale of TestHFReference's MXFP4 tolerance."""
    from transformers.models.gpt_oss import modeling_gpt_oss as mg
    fwd, gate = mg.GptOssExperts.forward, mg.GptOssExperts._apply_gate
    mg.GptOssExperts.forward = lambda self, h, ri=None, rw=None: fwd(self, q8_0(h), ri, rw)
    mg.GptOssExperts._apply_gate = lambda self, gu: q8_0(gate(self, gu))
    try:
        with torch.no_grad():
            return max(float((model(torch.tensor([t]), use_cache=False).logits[0].double() - l).abs().max())
                       for t, l in zip(PROMPTS, runs))
    finally:
        mg.GptOssExperts.forward, mg.GptOssExperts._apply_gate = fwd, gate


def main():
    src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # one summation order from run to run
    for d in sorted(p for p in src.iterdir() if (p / "config.json").is_file()):
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        prompts, runs = [], []
        for toks in PROMPTS:
            with torch.no_grad():
                logits = model(torch.tensor([toks]), use_cache=False).logits[0].double()
            runs.append(logits)
            vals, ids = torch.topk(logits, TOPK, dim=-1)
            prompts.append({
                "tokens": toks,
                "last_logits": [r(x) for x in logits[-1]],
                "top": [{"ids": i.tolist(), "logits": [r(x) for x in v]} for i, v in zip(ids, vals)],
            })
        # Sluice keeps K and V in float16; transformers with its k_proj and
        # v_proj outputs rounded so shows how far that alone moves the logits
        # (the scale TestHFReference's tolerance is set against).
        hooks = [m.register_forward_hook(lambda _m, _i, o: o.half().float())
                 for n, m in model.named_modules() if n.endswith(("k_proj", "v_proj"))]
        with torch.no_grad():
            shift = max(float((model(torch.tensor([t]), use_cache=False).logits[0].double() - l).abs().max())
                        for t, l in zip(PROMPTS, runs))
        for h in hooks:
            h.remove()
        q8_shift = q8_expert_shift(model, runs) if "quantization_config" in json.loads((d / "config.json").read_text()) else None
        cfg = model.config
        doc = {
            "generator": f"scripts/golden/hf_logits.py (transformers {transformers.__version__}, torch {torch.__version__}, float32, eager attention)",
            "class": type(model).__name__,
            "files": {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in HASHED},
            # What transformers made of config.json, to name a disagreement
            # before the logits show it.
            "layer_types": getattr(cfg, "layer_types", None),
            "sliding_window": getattr(cfg, "sliding_window", None),
            "rope_parameters": getattr(cfg, "rope_parameters", None),
            "query_pre_attn_scalar": getattr(cfg, "query_pre_attn_scalar", None),
            "f16_kv_shift": r(shift),
            "q8_expert_shift": None if q8_shift is None else r(q8_shift),
            "prompts": prompts,
        }
        path = out / (d.name + ".json")
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {path} ({doc['class']})", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Writes dequant_golden.json (blocks and their values as decoded by the
reference Python implementation, pip package gguf, gguf.quants.dequantize) and
quant_golden.json (inputs and the bytes gguf.quants.quantize makes of them).

Run from this directory: python3 gen_golden.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
Random blocks cover every type gguf can decode; the model blocks are the first
blocks of real Q4_1 and Q8_0 tensors of the default model.
"""
import json
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

rng = np.random.default_rng(7)

# byte offsets of f16 scale fields, which must be finite and modest
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_blocks(t, nblocks):
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    raw = rng.integers(0, 256, size=nblocks * ts, dtype=np.uint8)
    for b in range(nblocks):
        for off in HALF_FIELDS[t]:
            h = np.array([rng.normal() * 0.02], dtype=np.float16)
            raw[b * ts + off:b * ts + off + 2] = h.view(np.uint8)
    return raw, nblocks * bs


cases = []
for t in HALF_FIELDS:
    raw, n = random_blocks(t, 3)
    vals = gguf.quants.dequantize(raw, t).reshape(-1)
    assert vals.size == n
    cases.append({"name": "random", "type": t.name, "raw": raw.tobytes().hex(),
                  "want": [float(v) for v in vals.astype(np.float32)]})

if len(sys.argv) > 1:
    reader = gguf.GGUFReader(sys.argv[1])
    want = {"blk.0.attn_q.weight": 3, "blk.29.ffn_down.weight": 2, "token_embd.weight": 3}
    for tensor in reader.tensors:
        if tensor.name not in want:
            continue
        t = tensor.tensor_type
        bs, ts = gguf.GGML_QUANT_SIZES[t]
        raw = np.asarray(tensor.data).reshape(-1).view(np.uint8)[: want[tensor.name] * ts]
        vals = gguf.quants.dequantize(raw, t).reshape(-1)
        cases.append({"name": tensor.name, "type": t.name, "raw": raw.tobytes().hex(),
                      "want": [float(v) for v in vals.astype(np.float32)]})

# Quantization: gguf-py's numpy quantizers follow ggml's quantize_row_*_ref
# (K-quants are not implemented there). Inputs: normal noise, a shifted block
# (affine types), a zero block.
quant_cases = []
x = rng.standard_normal(256).astype(np.float32)
x[64:96] += 3
x[96:128] = 0
for t in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.F16, T.BF16]:
    q = gguf.quants.quantize(x.reshape(1, -1), t).reshape(-1)
    quant_cases.append({"type": t.name, "x": [float(v) for v in x], "want": q.view(np.uint8).tobytes().hex()})

with open("quant_golden.json", "w") as f:
    json.dump({"generator": "gen_golden.py, gguf " + getattr(gguf, "__version__", "0.19.0"),
               "cases": quant_cases}, f, indent=1)

with open("dequant_golden.json", "w") as f:
    json.dump({"generator": "gen_golden.py, gguf " + getattr(gguf, "__version__", "0.19.0"),
               "cases": cases}, f, indent=1)
print(len(cases), "cases")

"""Writes kquant_golden.json: inputs and the bytes ggml's own reference
quantizers (quantize_row_q{4,5,6,8}_K_ref, called through ctypes) make of them.

gguf-py has no K-quant quantizer, so this uses the libggml-base.so that
scripts/llamacpp builds: python3 gen_kquant_golden.py path/to/libggml-base.so
"""
import ctypes
import json
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])
rng = np.random.default_rng(11)

x = rng.standard_normal(1024).astype(np.float32)
x[256:512] *= 0.01
x[512:768] += 2.5  # a super-block with a large offset, stressing the mins
x[900:] = 0
types = {"Q4_K": (144, lib.quantize_row_q4_K_ref), "Q5_K": (176, lib.quantize_row_q5_K_ref),
         "Q6_K": (210, lib.quantize_row_q6_K_ref), "Q8_K": (292, lib.quantize_row_q8_K_ref)}
cases = []
for name, (size, fn) in types.items():
    out = (ctypes.c_uint8 * (size * len(x) // 256))()
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn(x.ctypes.data, out, len(x))
    cases.append({"type": name, "x": [float(v) for v in x], "want": bytes(out).hex()})

with open("kquant_golden.json", "w") as f:
    json.dump({"generator": "gen_kquant_golden.py, llama.cpp from llama-cpp-python 0.3.36", "cases": cases}, f, indent=1)
print(len(cases), "cases")

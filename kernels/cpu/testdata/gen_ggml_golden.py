"""Writes ggml_golden.json: what llama.cpp's CPU backend itself computes for
activation quantization (quantize_row_q8_0/q8_1/q8_K) and for the quantized
dot products (ggml_vec_dot_*), called through ctypes on the libraries that
scripts/llamacpp builds (-march=native, so the AVX2 code paths):

    python3 gen_ggml_golden.py .build/llamacpp/build/bin

Weights come from ggml's reference quantizers; activations are normal noise
with an outlier, as real hidden states have.
"""
import ctypes
import json
import os
import sys

import numpy as np

d = sys.argv[1]
base = ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
cpu = ctypes.CDLL(os.path.join(d, "libggml-cpu.so"))
cpu.ggml_cpu_init()  # fills the f16 tables the kernels read
rng = np.random.default_rng(23)
N = 1536

# weight type → (block bytes, block elems, reference quantizer, dot, activation type)
TYPES = {
    "Q4_0": (18, 32, "quantize_row_q4_0_ref", "ggml_vec_dot_q4_0_q8_0", "Q8_0"),
    "Q4_1": (20, 32, "quantize_row_q4_1_ref", "ggml_vec_dot_q4_1_q8_1", "Q8_1"),
    "Q5_0": (22, 32, "quantize_row_q5_0_ref", "ggml_vec_dot_q5_0_q8_0", "Q8_0"),
    "Q5_1": (24, 32, "quantize_row_q5_1_ref", "ggml_vec_dot_q5_1_q8_1", "Q8_1"),
    "Q8_0": (34, 32, "quantize_row_q8_0_ref", "ggml_vec_dot_q8_0_q8_0", "Q8_0"),
    "Q4_K": (144, 256, "quantize_row_q4_K_ref", "ggml_vec_dot_q4_K_q8_K", "Q8_K"),
    "Q5_K": (176, 256, "quantize_row_q5_K_ref", "ggml_vec_dot_q5_K_q8_K", "Q8_K"),
    "Q6_K": (210, 256, "quantize_row_q6_K_ref", "ggml_vec_dot_q6_K_q8_K", "Q8_K"),
}
ACT = {"Q8_0": (34, 32, "quantize_row_q8_0"), "Q8_1": (36, 32, "quantize_row_q8_1"),
       "Q8_K": (292, 256, "quantize_row_q8_K")}


def quantize(lib, fn, size, elems, x):
    out = (ctypes.c_uint8 * (size * len(x) // elems))()
    f = getattr(lib, fn)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    f(x.ctypes.data, out, len(x))
    return bytes(out)


x = rng.standard_normal(N).astype(np.float32)
x[5] = 35.0
acts = {name: quantize(cpu, fn, size, elems, x) for name, (size, elems, fn) in ACT.items()}

cases = []
for name, (size, elems, qfn, dfn, act) in TYPES.items():
    w = (rng.standard_normal(N) * 0.05).astype(np.float32)
    wq = quantize(base, qfn, size, elems, w)
    f = getattr(cpu, dfn)
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                  ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    s = ctypes.c_float()
    f(N, ctypes.byref(s), 0, wq, 0, acts[act], 0, 1)
    cases.append({"type": name, "w": wq.hex(), "dot": float(s.value)})

with open("ggml_golden.json", "w") as fh:
    json.dump({"generator": "gen_ggml_golden.py, llama.cpp from llama-cpp-python 0.3.36",
               "x": [float(v) for v in x], "acts": {k: v.hex() for k, v in acts.items()},
               "cases": cases}, fh, indent=1)
print(len(cases), "cases")

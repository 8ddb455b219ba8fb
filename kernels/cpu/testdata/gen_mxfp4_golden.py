"""Writes mxfp4_golden.json: what llama.cpp v0.5.0's ggml computes for MXFP4
(gpt-oss's expert weights), called through ctypes on the shared libraries
scripts/llamacpp/build-newest.sh builds (-march=native):

    python3 gen_mxfp4_golden.py .build/llamacpp-newest/build/bin

quantize_row_mxfp4_ref and dequantize_row_mxfp4 (libggml-base) give the
weight bytes and their values, quantize_row_q8_0 and ggml_vec_dot_mxfp4_q8_0
(libggml-cpu) the activation bytes and the dot product. Standard library
only: weights span twelve octaves (so scales differ block to block) and the
activations are normal noise with an outlier.
"""
import array
import ctypes
import json
import os
import random
import sys

d = sys.argv[1]
base = ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
cpu = ctypes.CDLL(os.path.join(d, "libggml-cpu.so"))
cpu.ggml_cpu_init()  # fills the f16 tables the kernels read
rng = random.Random(39)
N = 1536


def call(lib, fn, src, out_len):
    out = (ctypes.c_uint8 * out_len)()
    f = getattr(lib, fn)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    buf = array.array("f", src)
    f(buf.buffer_info()[0], out, len(src))
    return bytes(out)


x = [rng.gauss(0, 1) for _ in range(N)]
x[5] = 35.0
x = list(array.array("f", x))  # float32 values
w = []
for b in range(N // 32):
    scale = 2.0 ** rng.randint(-8, 3)
    w += [rng.gauss(0, 1) * scale for _ in range(32)]
w = list(array.array("f", w))
# a block of zeros (exponent 0) and one at the largest weights
w[64:96] = [0.0] * 32
wq = call(base, "quantize_row_mxfp4_ref", w, 17 * N // 32)
xq = call(cpu, "quantize_row_q8_0", x, 34 * N // 32)

deq = (ctypes.c_float * N)()
f = base.dequantize_row_mxfp4
f.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64]
f(wq, deq, N)

dot = cpu.ggml_vec_dot_mxfp4_q8_0
dot.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
s = ctypes.c_float()
dot(N, ctypes.byref(s), 0, wq, 0, xq, 0, 1)

with open("mxfp4_golden.json", "w") as fh:
    json.dump({"generator": "gen_mxfp4_golden.py, llama.cpp v0.5.0 (node-llama-cpp 3.22.1)",
               "x": x, "w": w, "xq": xq.hex(), "wq": wq.hex(),
               "dequant_bits": [array.array("f", [v]).tobytes().hex() for v in deq],
               "dot": s.value}, fh, indent=0)
print("dot", s.value)

#!/usr/bin/env python3
"""Checks each Sluice CUDA kernel against a NumPy reference on fresh random
inputs, independently of the Go code: the PTX is loaded through CuPy or,
where CuPy is missing, through PyTorch and the driver API (torchcupy.py);
the quantized blocks are random bytes decoded here by a second
implementation of the GGUF layouts (facts.md), references run in float64.

    check_kernels.py PTX_DIR [--out results.md] [--frontend auto|cupy|torch] [--quick]

Both front ends run the same checks against the same references; --quick
keeps one weight type per family (the emulator's second front-end pass).

Prints one line per check, ‖out − ref‖ / ‖ref‖ against its bound, and exits 1
if any check fails. Bounds: F32 accumulation ~1e-6; tensor-core matmuls round
x to bf16 (2⁻⁹) or f16 (2⁻¹²); attention reads an F16 cache.
"""
import argparse
import math
import sys

import numpy as np

cp = None  # the array front end: cupy, or torchcupy (main sets it)

rng = np.random.default_rng(1234)
results = []


def rel(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def record(name, err, bound):
    ok = err <= bound
    results.append((name, err, bound, ok))
    print(f"{'ok  ' if ok else 'FAIL'} {name:<40} rel err {err:.2e}  bound {bound:.0e}", flush=True)


# ---- GGUF blocks: random bytes with sane scales, and their dequantization ----

def f16_bytes(v):
    return np.asarray(v, np.float16).view(np.uint8).reshape(-1, 2)


def make_blocks(kind, rows, cols):
    """Returns (raw bytes [rows, rowBytes], dequantized float64 [rows, cols])."""
    if kind == "f32":
        w = rng.standard_normal((rows, cols)).astype(np.float32) * 0.05
        return w.view(np.uint8), w.astype(np.float64)
    if kind == "f16":
        w = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float16)
        return w.view(np.uint8), w.astype(np.float64)
    if kind == "bf16":  # the top half of a float32, rounded to nearest even
        u = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32).view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return bits.view(np.uint8), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    spec = {"q8_0": (32, 34), "q4_1": (32, 20), "q4_k": (256, 144), "q6_k": (256, 210)}[kind]
    be, bb = spec
    nb = rows * cols // be
    raw = rng.integers(0, 256, (nb, bb), dtype=np.uint8)
    d = (rng.random(nb) * 0.01 + 0.001).astype(np.float16)
    if kind == "q8_0":
        raw[:, 0:2] = f16_bytes(d)
        q = raw[:, 2:].view(np.int8).astype(np.float64)
        y = d.astype(np.float64)[:, None] * q
    elif kind == "q4_1":
        raw[:, 0:2] = f16_bytes(d)
        m = (rng.standard_normal(nb) * 0.05).astype(np.float16)
        raw[:, 2:4] = f16_bytes(m)
        qs = raw[:, 4:20]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float64)
        y = d.astype(np.float64)[:, None] * q + m.astype(np.float64)[:, None]
    elif kind == "q4_k":
        dmin = (rng.random(nb) * 0.01).astype(np.float16)
        raw[:, 0:2], raw[:, 2:4] = f16_bytes(d), f16_bytes(dmin)
        s, qs = raw[:, 4:16].astype(np.int64), raw[:, 16:144]
        sc, mn = np.zeros((nb, 8)), np.zeros((nb, 8))
        for j in range(8):
            if j < 4:
                sc[:, j], mn[:, j] = s[:, j] & 63, s[:, j + 4] & 63
            else:
                sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
                mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
        y = np.zeros((nb, 256))
        dd, dm = d.astype(np.float64)[:, None], dmin.astype(np.float64)[:, None]
        for c in range(4):
            q = qs[:, 32 * c:32 * c + 32]
            y[:, 64 * c:64 * c + 32] = dd * sc[:, 2 * c:2 * c + 1] * (q & 15) - dm * mn[:, 2 * c:2 * c + 1]
            y[:, 64 * c + 32:64 * c + 64] = dd * sc[:, 2 * c + 1:2 * c + 2] * (q >> 4) - dm * mn[:, 2 * c + 1:2 * c + 2]
    else:  # q6_k
        raw[:, 208:210] = f16_bytes(d)
        dd = d.astype(np.float64)[:, None]
        y = np.zeros((nb, 256))
        for h in range(2):
            ql = raw[:, 64 * h:64 * h + 64].astype(np.int64)
            qh = raw[:, 128 + 32 * h:128 + 32 * h + 32].astype(np.int64)
            sc = raw[:, 192 + 8 * h:192 + 8 * h + 8].view(np.int8).astype(np.float64)
            for l in range(32):
                i = l // 16
                q1 = ((ql[:, l] & 15) | (((qh[:, l] >> 0) & 3) << 4)) - 32
                q2 = ((ql[:, l + 32] & 15) | (((qh[:, l] >> 2) & 3) << 4)) - 32
                q3 = ((ql[:, l] >> 4) | (((qh[:, l] >> 4) & 3) << 4)) - 32
                q4 = ((ql[:, l + 32] >> 4) | (((qh[:, l] >> 6) & 3) << 4)) - 32
                for k, (q, si) in enumerate(((q1, i), (q2, i + 2), (q3, i + 4), (q4, i + 6))):
                    y[:, 128 * h + 32 * k + l] = dd[:, 0] * sc[:, si] * q
    return raw.reshape(rows, -1), y.reshape(rows, cols)


def frontend(name):
    if name != "torch":
        try:
            import cupy
            return cupy
        except ImportError:
            if name == "cupy":
                raise
            print("no CuPy: the PyTorch front end runs the checks", flush=True)
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torchcupy
    return torchcupy


# ---- kernels ----

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx_dir")
    ap.add_argument("--out")
    ap.add_argument("--frontend", choices=("auto", "cupy", "torch"), default="auto")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    global cp
    cp = frontend(a.frontend)
    print(f"front end: {cp.__name__} {cp.__version__}", flush=True)
    mod = {m: cp.RawModule(path=f"{a.ptx_dir}/{m}.ptx") for m in ("elementwise", "matmul", "attention", "sample", "mask")}
    fn = lambda m, name: mod[m].get_function(name)
    i32, i64, f32 = np.int32, np.int64, np.float32

    # matmul and get_rows for each weight type
    for kind in ("f16", "q4_k") if a.quick else ("f32", "f16", "bf16", "q8_0", "q4_1", "q4_k", "q6_k"):
        out_f, in_f = 1000, 2048
        raw, w = make_blocks(kind, out_f, in_f)
        wd = cp.asarray(np.ascontiguousarray(raw))
        row_bytes = raw.shape[1]
        rows = np.array([0, 999, 5, 5, 500], np.int32)
        dst = cp.zeros((len(rows), in_f), cp.float32)
        fn("elementwise", f"get_rows_{kind}")((len(rows),), (128,), (dst, wd, cp.asarray(rows), i32(in_f), i64(row_bytes)))
        record(f"get_rows {kind}", rel(dst.get(), w[rows]), 1e-6)
        bias = rng.standard_normal(out_f).astype(np.float32)
        for n in (1, 3, 8, 17, 64, 100):
            x = rng.standard_normal((n, in_f)).astype(np.float32)
            ref = x.astype(np.float64) @ w.T + bias
            dst = cp.zeros((n, out_f), cp.float32)
            args = (dst, cp.asarray(x), wd, cp.asarray(bias), i32(n), i32(in_f), i32(out_f), i64(row_bytes))
            if n <= 8:
                nr = 1 if n == 1 else 4 if n <= 4 else 8
                rpb = 4 if kind in ("f16", "bf16") else 2  # rows per block (matmul.cu's R)
                unused = (np.uint64(0), np.uint64(0), np.uint64(0), i32(0))
                fn("matmul", f"gemv_{kind}_{nr}")((-(-out_f // rpb),), (128,), (
                    cp.asarray(x), i32(n), i32(in_f), i64(row_bytes), dst, wd, cp.asarray(bias), i32(out_f)) + unused + unused
                    + (np.uint64(0), np.uint64(0), ones(in_f), f32(0), np.uint64(0)))
                bound = 1e-5
            elif kind == "f32":
                continue
            elif n <= 64:  # the skinny kernels: 16, 32 or 64 rows of x (gemm_skinny.go)
                m = 16 if n <= 16 else 32 if n <= 32 else 64
                fn("matmul", f"skinny{m}_{kind}")(((out_f + 31) // 32,), (128,), args)
                bound = 1e-2 if kind == "bf16" else 2e-3
            else:
                fn("matmul", f"mma_{kind}")(((out_f + 63) // 64, (n + 63) // 64), (128,), args)
                bound = 1e-2 if kind == "bf16" else 2e-3
            record(f"matmul {kind} n={n}", rel(dst.get(), ref), bound)
        check_gemv_epilogues(fn, kind, wd, w, row_bytes, bias)

    # rms_norm (in place too), swiglu, add
    x = rng.standard_normal((7, 4096)).astype(np.float32) * 3
    w = rng.standard_normal(4096).astype(np.float32)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-5) * w
    xd = cp.asarray(x)
    fn("elementwise", "rms_norm")((7,), (256,), (xd, xd, cp.asarray(w), i32(4096), f32(1e-5)))
    record("rms_norm (in place)", rel(xd.get(), ref), 1e-6)
    g, u = rng.standard_normal((2, 5000)).astype(np.float32)
    gd = cp.asarray(g)
    fn("elementwise", "swiglu")((20,), (256,), (gd, gd, cp.asarray(u), i64(5000)))
    record("swiglu", rel(gd.get(), g / (1 + np.exp(-g.astype(np.float64))) * u), 1e-6)
    ud = cp.asarray(u)
    fn("elementwise", "add")((20,), (256,), (ud, cp.asarray(g), i64(5000)))
    record("add", rel(ud.get(), u.astype(np.float64) + g), 1e-6)

    # rope, both styles
    heads, hd, n = 8, 128, 5
    inv = (500000.0 ** (-np.arange(0, hd, 2) / hd)).astype(np.float32)
    pos = np.array([0, 1, 17, 1000, 8000], np.int32)
    for style, halves in (("interleaved", 0), ("halves", 1)):
        x = rng.standard_normal((n, heads, hd)).astype(np.float32)
        ang = pos[:, None].astype(np.float64) * inv[None, :].astype(np.float64)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a_idx = np.arange(hd // 2) if halves else 2 * np.arange(hd // 2)
        b_idx = a_idx + (hd // 2 if halves else 1)
        ref = x.astype(np.float64).copy()
        x0, x1 = x[:, :, a_idx], x[:, :, b_idx]
        ref[:, :, a_idx], ref[:, :, b_idx] = x0 * c - x1 * s, x0 * s + x1 * c
        xd = cp.asarray(x)
        fn("elementwise", "rope")(((heads * hd // 2 + 127) // 128, n), (128,), (
            xd, i32(heads), np.uint64(0), i32(0), cp.asarray(inv), cp.asarray(pos), i32(hd), i32(hd // 2), i32(halves)))
        record(f"rope {style}", rel(xd.get(), ref), 1e-6)

    check_attention(fn)
    for hd, group in ((128, 4),) if a.quick else ((128, 4), (64, 16), (256, 2)):
        check_decode(fn, hd, group)
    check_sample(fn)
    check_mask(fn)

    failed = [r for r in results if not r[3]]
    if a.out:
        with open(a.out, "w") as f:
            f.write("| kernel check | rel err | bound | |\n|---|---:|---:|---|\n")
            for name, err, bound, ok in results:
                f.write(f"| {name} | {err:.2e} | {bound:.0e} | {'ok' if ok else 'FAIL'} |\n")
    print(f"{len(results) - len(failed)}/{len(results)} kernel checks passed")
    sys.exit(1 if failed else 0)


def check_attention(fn):
    """kv_write then paged_attention: a prefill chunk, a decode row and a
    prefill from 0, GQA 32 query heads over 8 KV heads, shuffled blocks; then
    paged_prefill on the two chunks."""
    i32, f32 = np.int32, np.float32
    heads, kvh, hd, bs, nblocks = 32, 8, 128, 16, 64
    group = heads // kvh
    kv_cols = kvh * hd
    cache_k = rng.standard_normal((nblocks * bs, kv_cols)).astype(np.float16)
    cache_v = rng.standard_normal((nblocks * bs, kv_cols)).astype(np.float16)
    perm = rng.permutation(nblocks).astype(np.int32)
    tables = [perm[0:20], perm[20:40], perm[40:60]]
    seqs = [(50, 70), (200, 201), (0, 33)]  # rows [from, to) of positions; context = to
    positions, slots, seq_rows = [], [], []
    for si, (a, b) in enumerate(seqs):
        start = len(positions)
        for p in range(a, b):
            positions.append(p)
            slots.append(tables[si][p // bs] * bs + p % bs)
        seq_rows.append((start, len(positions)))
    n = len(positions)
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_cols)).astype(np.float32)
    v = rng.standard_normal((n, kv_cols)).astype(np.float32)
    kd, vd = cp.asarray(cache_k.view(np.uint16)), cp.asarray(cache_v.view(np.uint16))
    fn("elementwise", "kv_write")((n,), (128,), (kd, vd, cp.asarray(k), cp.asarray(v), cp.asarray(np.array(slots, i32)), i32(kv_cols)))
    rows_per = max(1, 16 // group)
    items = []
    for si, (s, e) in enumerate(seq_rows):
        for r in range(s, e, rows_per):
            items += [si, r, min(rows_per, e - r)]
    seq_off = np.array([0, 20, 40], i32)
    blocks = np.concatenate(tables).astype(i32)
    scale = 1 / math.sqrt(hd)
    n_items = len(items) // 3
    common = (cp.asarray(q), kd, vd, cp.asarray(np.array(items, i32)), cp.asarray(seq_off), cp.asarray(blocks),
              cp.asarray(np.array(positions, i32)), i32(heads), i32(kvh), i32(hd), i32(bs), f32(scale))
    outs = {}
    counters = cp.zeros(n_items * kvh, cp.int32)
    # whole contexts, then 64-position splits merged by the last split of each
    # item; twice, as the counters must be back at zero after a launch
    for split_len in (1 << 30, 64, 64):
        splits = -(-(max(positions) + 1) // split_len)  # ceil(context / split_len)
        part = cp.zeros(n_items * kvh * splits * (16 * 128 + 32), cp.float32)
        out = cp.zeros((n, heads * hd), cp.float32)
        fn("attention", "paged_attention")((n_items, kvh, splits), (128,), (out,) + common + (part, i32(split_len), counters))
        outs[(splits, len(outs))] = out.get()
    record("paged_attention split counters reset", float(np.abs(counters.get()).sum()), 0)
    # reference over the cache as written (F16-rounded K/V, like the kernel)
    ck = kd.get().view(np.float16).astype(np.float64)
    cv = vd.get().view(np.float16).astype(np.float64)
    ref = np.zeros((n, heads, hd))
    for si, (s, e) in enumerate(seq_rows):
        for r in range(s, e):
            ctx = positions[r] + 1
            sl = [tables[si][p // bs] * bs + p % bs for p in range(ctx)]
            for h in range(heads):
                g = h // group
                K, V = ck[sl, g * hd:(g + 1) * hd], cv[sl, g * hd:(g + 1) * hd]
                sc = K @ q[r, h * hd:(h + 1) * hd].astype(np.float64) * scale
                p = np.exp(sc - sc.max())
                ref[r, h] = (p / p.sum()) @ V
    record("kv_write", rel(ck[slots], k.astype(np.float16).astype(np.float64)), 0)
    for (splits, i), out in outs.items():
        record(f"paged_attention (GQA 32/8, {splits} splits, run {i + 1})", rel(out, ref.reshape(n, -1)), 1e-4)
    # paged_prefill_128 (tensor cores, F16 q·scale and P) on the multi-row
    # sequences, over the same cache: items of 64 query vectors
    pitems = []
    for si, (s, e) in enumerate(seq_rows):
        if e - s > 1:
            for qv in range(s * group, e * group, 64):
                pitems += [si, qv, min(64, e * group - qv), 0]
    pseqs = np.array([[off, s, e - s] for off, (s, e) in zip(seq_off, seq_rows)], i32).ravel()
    out = cp.zeros((n, heads * hd), cp.float32)
    fn("attention", "paged_prefill_128")((len(pitems) // 4, kvh), (128,), (
        out, cp.asarray(q), kd, vd, cp.asarray(np.array(pitems, i32)), cp.asarray(pseqs), cp.asarray(blocks),
        cp.asarray(np.array(positions, i32)), i32(heads), i32(kvh), i32(bs), f32(scale)))
    rows = [r for (s, e) in seq_rows if e - s > 1 for r in range(s, e)]
    record("paged_prefill_128 (GQA 32/8, chunks of 20 and 33 rows)", rel(out.get()[rows], ref.reshape(n, -1)[rows]), 2e-3)


def check_decode(fn, hd, group):
    """paged_decode_<hd> (attention.cu), one decode row a sequence at contexts
    1, 255, 257 and 600 (partitions of 256, then split-K's shorter ones: about
    7 an item, attention.go's decodePartLen), K/V of the new rows read from k
    and v and written to the cache by the kernel itself (fused), partitions
    merged by the last to finish; twice each, as the counters must be back at
    0."""
    i32, f32 = np.int32, np.float32
    kvh, bs, nblocks = 2, 16, 160
    heads = kvh * group
    nq = 8 if hd in (64, 128) else 4  # query vectors an item (attention.go's decodeShape)
    kv_cols = kvh * hd
    cache_k = rng.standard_normal((nblocks * bs, kv_cols)).astype(np.float16)
    cache_v = rng.standard_normal((nblocks * bs, kv_cols)).astype(np.float16)
    perm = rng.permutation(nblocks).astype(np.int32)
    ctxs = [1, 255, 257, 600]
    tables = [perm[40 * i:40 * i + 40] for i in range(len(ctxs))]
    n = len(ctxs)
    positions = [c - 1 for c in ctxs]
    slots = [tables[i][p // bs] * bs + p % bs for i, p in enumerate(positions)]
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    k = rng.standard_normal((n, kv_cols)).astype(np.float32)
    v = rng.standard_normal((n, kv_cols)).astype(np.float32)
    def part_len(ctx, splits):  # attention.cu's decode_part
        if splits <= 0:
            return 256
        return min(256, max(64, -(-(-(-ctx // splits)) // 64) * 64))

    seqs = np.array([[40 * i, i, 1] for i in range(n)], i32).ravel()
    blocks = np.concatenate(tables).astype(i32)
    scale = 1 / math.sqrt(hd)
    kd, vd = cp.asarray(cache_k.view(np.uint16)), cp.asarray(cache_v.view(np.uint16))
    outs = []
    for splits in (0, 7):
        items, parts, z = [], 0, splits
        for si, p in enumerate(positions):
            for qv in range(si * group, (si + 1) * group, nq):
                np_ = -(-(p + 1) // part_len(p + 1, splits))
                items += [si, qv, min(nq, (si + 1) * group - qv), parts]
                parts += np_ if np_ > 1 else 0
                z = max(z, np_)
        n_items = len(items) // 4
        part = cp.zeros(max(parts, 1) * kvh * (nq * hd + 2 * nq), cp.float32)
        counters = cp.zeros(n_items * kvh, cp.int32)
        for _ in range(2):
            out = cp.zeros((n, heads * hd), cp.float32)
            fn("attention", f"paged_decode_{hd}")((n_items, kvh, z), (128,), (
                out, cp.asarray(q), kd, vd, cp.asarray(k), cp.asarray(v), i32(1), cp.asarray(np.array(items, i32)),
                cp.asarray(seqs), cp.asarray(blocks), cp.asarray(np.array(positions, i32)), i32(heads), i32(kvh),
                i32(bs), f32(scale), part, counters, i32(splits)))
            outs.append(out.get())
    record(f"paged_decode_{hd} partition counters reset", float(np.abs(counters.get()).sum()), 0)
    ck = kd.get().view(np.float16).astype(np.float64)
    cv = vd.get().view(np.float16).astype(np.float64)
    record(f"paged_decode_{hd} fused kv_write", rel(ck[slots], k.astype(np.float16).astype(np.float64)), 0)
    ref = np.zeros((n, heads, hd))
    for si, p in enumerate(positions):
        sl = [tables[si][t // bs] * bs + t % bs for t in range(p + 1)]
        for h in range(heads):
            g = h // group
            K, V = ck[sl, g * hd:(g + 1) * hd], cv[sl, g * hd:(g + 1) * hd]
            sc = K @ q[si, h * hd:(h + 1) * hd].astype(np.float64) * scale
            e = np.exp(sc - sc.max())
            ref[si, h] = (e / e.sum()) @ V
    for i, out in enumerate(outs):
        record(f"paged_decode_{hd} (GQA {group}, contexts {ctxs}, split-K {(0, 7)[i // 2]}, run {i % 2 + 1})",
               rel(out, ref.reshape(n, -1)), 1e-4)


_ones = {}


def ones(n):
    """A device buffer of n float32 ones: the norm weight of a GEMV without a
    folded RMSNorm (the backend's Backend.ones)."""
    if n not in _ones:
        _ones[n] = cp.asarray(np.ones(n, np.float32))
    return _ones[n]


def check_gemv_epilogues(fn, kind, wd, w, row_bytes, bias):
    """The fused GEMV epilogues at batch 1: res (dst = W·x + b and res += dst)
    over w's first 500 rows, and glu (w's rows [0, 500) as gate and
    [500, 1000) as up: gate, up and silu(gate)·up)."""
    i32, i64, u64, f32 = np.int32, np.int64, np.uint64, np.float32
    out_f, in_f = w.shape
    half = out_f // 2
    rpb = 4 if kind in ("f16", "bf16") else 2
    x = rng.standard_normal((1, in_f)).astype(np.float32)
    y = x.astype(np.float64) @ w.T + bias
    none = (u64(0), u64(0), u64(0), i32(0))
    xd, bd = cp.asarray(x), cp.asarray(bias)
    res0 = rng.standard_normal((1, half)).astype(np.float32)
    dst, res = cp.zeros((1, half), cp.float32), cp.asarray(res0)
    fn("matmul", f"gemv_{kind}_1")((-(-half // rpb),), (128,), (
        xd, i32(1), i32(in_f), i64(row_bytes), dst, wd, bd, i32(half)) + none + none + (res, u64(0), ones(in_f), f32(0), u64(0)))
    record(f"gemv {kind} + residual", rel(res.get(), res0 + y[:, :half]), 1e-5)
    # the RMSNorm folded in: input rmsnorm(x)·nw, the normalised row written too
    nw = rng.standard_normal(in_f).astype(np.float32)
    xn = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).mean() + 1e-5) * nw
    dst, hout = cp.zeros((1, half), cp.float32), cp.zeros((1, in_f), cp.float32)
    fn("matmul", f"gemv_{kind}_1")((-(-half // rpb),), (128,), (
        xd, i32(1), i32(in_f), i64(row_bytes), dst, wd, bd, i32(half)) + none + none
        + (u64(0), u64(0), cp.asarray(nw), np.float32(1e-5), hout))
    record(f"gemv {kind} + rms_norm", rel(dst.get(), xn @ w[:half].T + bias[:half]), 1e-5)
    record(f"gemv {kind} + rms_norm: normalised x", rel(hout.get(), xn), 1e-6)
    gate, up, glu = (cp.zeros((1, half), cp.float32) for _ in range(3))
    fn("matmul", f"gemv_glu_{kind}_1")((-(-half // rpb),), (128,), (
        xd, i32(1), i32(in_f), i64(row_bytes), gate, wd, u64(0), i32(half), up, wd[half:], u64(0), i32(half))
        + none + (u64(0), glu, ones(in_f), f32(0), u64(0)))
    g, u = y[:, :half] - bias[:half], y[:, half:] - bias[half:]
    record(f"gemv_glu {kind}", rel(glu.get(), g / (1 + np.exp(-g)) * u), 1e-5)


def check_mask(fn):
    """mask_logits (mask.cu) against the host mask (engine/constraint.go):
    the default model's vocabulary plus 3, so the last word is partial, with
    masked rows beside unmasked ones; the fraction of logits that differ."""
    rows, vocab = 5, 49155
    words = (vocab + 31) // 32
    logits = rng.standard_normal((rows, vocab)).astype(np.float32)
    masked = [0, 2, 3]
    bits = rng.integers(0, 2**32, size=(len(masked), words), dtype=np.uint64).astype(np.uint32)
    ref = logits.copy()
    ids = np.arange(vocab)
    for k, r in enumerate(masked):
        allowed = (bits[k][ids // 32] >> (ids % 32).astype(np.uint32)) & 1
        ref[r][allowed == 0] = -np.inf
    tab = np.concatenate([np.array(masked, np.int32), bits.view(np.int32).ravel()])
    ld = cp.asarray(logits)
    fn("mask", "mask_logits")((min(-(-vocab // 256), 256), len(masked)), (256,),
                              (ld, cp.asarray(tab), np.int32(len(masked)), np.int32(vocab), np.int32(words)))
    record("mask_logits = host mask", float(np.mean(ld.get() != ref)), 0)


def check_sample(fn):
    """The device sampler against the engine's chain (engine/sample.go) for
    greedy, top-k with top-p and temperature, and temperature alone (the
    candidates in the host's order: top-k sorted by logit, else id order with
    the argmax first); top-p without top-k must come back undecided (-1)."""
    rows, vocab = 32, 128256
    logits = rng.standard_normal((rows, vocab)).astype(np.float32) * 3
    params = np.zeros((rows, 12), np.uint32)
    setting = []
    for r in range(rows):
        temp, topk, topp = (0.0, 0, 1.0) if r < 8 else (0.8, 40, 0.9) if r < 16 else (1.1, 0, 1.0) if r < 28 else (1.0, 0, 0.9)
        u = rng.random()
        params[r, 0] = np.float32(temp).view(np.uint32)
        params[r, 1] = np.float32(topp).view(np.uint32)
        params[r, 3] = topk
        params[r, 9:11] = np.array([u], np.float64).view(np.uint32)
        setting.append((temp, topk, topp, u))
    out = cp.zeros(rows, cp.int32)
    fn("sample", "sample")((rows,), (1024,), (out, cp.asarray(logits), np.uint64(0), cp.asarray(params), np.int32(vocab)))
    got = out.get()
    agree = 0
    for r, (temp, topk, topp, u) in enumerate(setting):
        l = logits[r]
        best = int(np.argmax(l))
        if temp == 0:
            want = best
        elif topk == 0 and topp < 1:
            want = -1
        else:
            if topk:
                order = np.lexsort((np.arange(vocab), -l.astype(np.float64)))[:topk]
            else:
                order = np.arange(vocab)
                order[0], order[best] = best, 0
            lo = l[order].astype(np.float64)
            if topp < 1:
                e = np.exp(lo - lo[0])
                cut = int(np.searchsorted(np.cumsum(e / e.sum()), topp)) + 1
                order, lo = order[:cut], lo[:cut]
            e = np.exp((lo - lo[0]) / np.float64(np.float32(temp)))
            cum = np.cumsum(e / e.sum())
            want = int(order[min(int(np.searchsorted(cum, u, side="right")), len(order) - 1)])
        agree += int(got[r]) == want
    # float64 sums associate differently here: a draw within ~1e-16 of a
    # boundary may differ, which 32 rows will not show
    record("sample = the engine's chain", 1 - agree / rows, 0)

if __name__ == "__main__":
    main()

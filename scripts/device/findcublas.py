#!/usr/bin/env python3
"""Finds the cuBLAS the CUDA backend should load on the GPU machine.

The one PyTorch itself loads is the one known to work with the driver there,
so that comes first: a small GEMM makes PyTorch load it, and /proc/self/maps
says which file it is. Without PyTorch (or a GPU), the places it would come
from are searched: a CUDA 13 wheel's nvidia/cu13/lib, a CUDA 12 wheel's
nvidia/cublas/lib, torch/lib, LD_LIBRARY_PATH and the loader's cache.
SLUICE_CUBLAS set (a file, a directory, or "off") overrides all of it.

Prints lines starting "cublas" (first.sh's summary keeps those); with
--env FILE writes SLUICE_CUBLAS=... there for the later stages. Exits 0 when
a library was chosen, 3 when none was found.
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

NAMES = ("libcublas.so.13*", "libcublas.so.12*")
WHEEL_DIRS = (("nvidia", "cu13", "lib"), ("nvidia", "cublas", "lib"), ("torch", "lib"))


def torch_loaded():
    """The libcublas PyTorch maps after a GEMM, or (None, why not)."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        return None, f"no PyTorch ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return None, f"PyTorch {torch.__version__} sees no GPU"
    a = torch.ones(64, 64, device="cuda", dtype=torch.float16)
    (a @ a).sum().item()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.match(r"libcublas\.so", os.path.basename(path)):
                return path, f"loaded by PyTorch {torch.__version__} (CUDA {torch.version.cuda})"
    return None, f"PyTorch {torch.__version__} ran a GEMM without mapping a libcublas.so"


def search():
    """Candidate (path, where) pairs in the order they are preferred."""
    found = []
    roots = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in roots:
            roots.append(p)
    try:
        import site

        roots += [p for p in site.getsitepackages() + [site.getusersitepackages()] if p not in roots]
    except Exception:  # noqa: BLE001 - a venv without site's helpers
        pass
    for parts in WHEEL_DIRS:
        for root in roots:
            d = os.path.join(root, *parts)
            found += [(p, "wheel " + "/".join(parts)) for n in NAMES for p in sorted(glob.glob(os.path.join(d, n)))]
    for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        found += [(p, "LD_LIBRARY_PATH") for n in NAMES for p in sorted(glob.glob(os.path.join(d, n)))]
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            m = re.search(r"(libcublas\.so\.1[23]\S*) .*=> (\S+)", line)
            if m:
                found.append((m.group(2), "ldconfig"))
    except (OSError, subprocess.SubprocessError):
        pass
    seen, unique = set(), []
    for p, where in found:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append((p, where))
    return unique


def version(path):
    """The version the file name says (libcublas.so.13.1.0.3), and the
    wheels' distribution versions that pip recorded."""
    m = re.search(r"\.so\.([0-9.]+)$", os.path.realpath(path))
    v = m.group(1) if m else "?"
    try:
        from importlib import metadata

        dists = [f"{n} {metadata.version(n)}" for n in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12")
                 if _has(metadata, n)]
    except ImportError:
        dists = []
    return v + (f" (pip: {', '.join(dists)})" if dists else "")


def _has(metadata, name):
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", help="write SLUICE_CUBLAS=... to this file")
    ap.add_argument("--no-torch", action="store_true", help="search only (tests)")
    args = ap.parse_args()

    chosen, why = None, ""
    override = os.environ.get("SLUICE_CUBLAS", "")
    if override:
        chosen, why = override, "SLUICE_CUBLAS set"
    else:
        path, note = (None, "not asked") if args.no_torch else torch_loaded()
        print(f"cublas torch: {note}{': ' + path if path else ''}")
        cands = search()
        for p, where in cands:
            print(f"cublas candidate: {p} ({where})")
        if path:
            chosen, why = path, note
        elif cands:
            chosen, why = cands[0][0], cands[0][1]
    if not chosen:
        print("cublas: none found; the backend multiplies with its own mma kernels")
        return 3
    if chosen == "off":
        print("cublas: off (SLUICE_CUBLAS=off)")
    else:
        print(f"cublas: {chosen} -> {os.path.realpath(chosen)}, version {version(chosen)}, {why}")
    if args.env:
        with open(args.env, "w") as f:
            f.write(f"SLUICE_CUBLAS={shlex.quote(chosen)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

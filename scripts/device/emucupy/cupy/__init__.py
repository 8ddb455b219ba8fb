"""A NumPy-backed stand-in for CuPy whose kernels run on Sluice's CPU
emulator, so that check_kernels.py itself is tested where no GPU is:

    g++ -std=c++20 -O1 -shared -fPIC -Ikernels/cuda/emu kernels/cuda/emu.cpp -o bin/libcudaemu.so
    EMU_LIB=bin/libcudaemu.so PYTHONPATH=scripts/device/emucupy \\
        python3 scripts/device/check_kernels.py kernels/cuda/ptx

(`make cuda-emu` does this.) Only what check_kernels.py uses: asarray and
zeros (host arrays, copied as a device copy would be), RawModule(path=...)
and its kernels, launched through emu_launch with 8-byte arguments exactly as
the Go backend passes them.
"""
import ctypes
import os

import numpy as np

__version__ = "emulated"
float32, int32, uint64 = np.float32, np.int32, np.uint64
_lib = ctypes.CDLL(os.environ["EMU_LIB"])


class _Array(np.ndarray):
    def get(self):
        return np.asarray(self).copy()


def asarray(a):
    return np.array(a, copy=True, order="C").view(_Array)


def zeros(shape, dtype=np.float32):
    return np.zeros(shape, dtype).view(_Array)


def _arg(a):
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    if isinstance(a, (np.float32, float)):
        return int(np.float32(a).view(np.uint32))
    return int(a) & 0xFFFFFFFFFFFFFFFF


class RawModule:
    def __init__(self, path):
        open(path).close()  # the PTX must exist; the emulator runs the .cu source

    def get_function(self, name):
        def launch(grid, block, args):
            g = tuple(grid) + (1,) * (3 - len(grid))
            b = tuple(block) + (1,) * (3 - len(block))
            vals = (ctypes.c_uint64 * len(args))(*[_arg(a) for a in args])
            err = ctypes.create_string_buffer(512)
            if _lib.emu_launch(name.encode(), *g, *b, vals, len(args), err, 512):
                raise RuntimeError(err.value.decode())

        return launch

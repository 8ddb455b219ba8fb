"""The part of CuPy's surface that check_kernels.py uses, built on PyTorch
(device memory) and the CUDA driver API through ctypes (PTX modules and
launches), for a GPU machine that has PyTorch but no CuPy:

    python3 scripts/device/check_kernels.py kernels/cuda/ptx --frontend torch

Memory: each array is a torch uint8 tensor of its bytes, with the NumPy
shape and dtype kept beside it, so no dtype needs a torch equivalent.
Modules: cuModuleLoadDataEx with JIT info and error log buffers, so a PTX
the driver cannot compile says why. Launches: cuLaunchKernel on the legacy
default stream, which is torch's default stream too, so copies and kernels
stay in one order; every argument is an 8-byte value (a device address, an
integer, a float32's bits in the low half) exactly as the Go backend passes
them.

The driver library is SLUICE_LIBCUDA (default libcuda.so.1). `make cuda-emu`
sets it to the CPU emulator's libcudaemu.so, which exports the same entry
points, and puts scripts/device/emutorch (a NumPy stand-in for torch) on the
path: this file then runs unchanged where no GPU is.
"""
import ctypes
import os

import numpy as np
import torch

float32, int32, uint64 = np.float32, np.int32, np.uint64
__version__ = f"torchcupy over torch {torch.__version__}"

_cu = ctypes.CDLL(os.environ.get("SLUICE_LIBCUDA", "libcuda.so.1"))
_vp, _u = ctypes.c_void_p, ctypes.c_uint
_cu.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
_cu.cuModuleLoadDataEx.argtypes = [ctypes.POINTER(_vp), ctypes.c_char_p, _u, ctypes.POINTER(ctypes.c_int),
                                   ctypes.POINTER(_vp)]
_cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(_vp), _vp, ctypes.c_char_p]
_cu.cuLaunchKernel.argtypes = [_vp, _u, _u, _u, _u, _u, _u, _u, _vp, ctypes.POINTER(_vp), ctypes.POINTER(_vp)]

# CUjit_option values (cuda.h)
_JIT_INFO_LOG, _JIT_INFO_LOG_SIZE, _JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE, _JIT_LOG_VERBOSE = 3, 4, 5, 6, 12
_LOG_BYTES = 1 << 16

# Arguments of launches not yet waited for: a temporary array passed to a
# launch must outlive the kernel, whatever Python's reference counts say.
_live = []


def _check(res, what):
    if res != 0:
        s = ctypes.c_char_p()
        _cu.cuGetErrorString(res, ctypes.byref(s))
        raise RuntimeError(f"{what}: CUDA error {res} ({s.value.decode() if s.value else 'unknown'})")


_ready = False


def _init():
    """Makes torch create the device's primary context and make it current on
    this thread, where the driver calls below then find it."""
    global _ready
    if not _ready:
        torch.zeros(1, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        _ready = True


def _sync():
    torch.cuda.synchronize()
    _live.clear()


class ndarray:
    def __init__(self, host):
        _init()
        host = np.ascontiguousarray(host)
        self.shape, self.dtype, self._off = host.shape, host.dtype, 0
        self._t = torch.from_numpy(host.reshape(-1).view(np.uint8).copy()).to("cuda")

    @property
    def ptr(self):
        return self._t.data_ptr() + self._off

    def __getitem__(self, key):
        """a[i:] only: rows i.. of the same memory, as CuPy's view."""
        if not isinstance(key, slice) or key.stop is not None or key.step is not None:
            raise TypeError("torchcupy: only a[i:] views")
        i = key.start or 0
        v = object.__new__(ndarray)
        row = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        v.shape, v.dtype, v._t, v._off = (self.shape[0] - i,) + self.shape[1:], self.dtype, self._t, self._off + i * row
        return v

    def get(self):
        _sync()
        n = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        return self._t.cpu().numpy()[self._off:self._off + n].view(self.dtype).reshape(self.shape)


def asarray(a):
    return ndarray(np.asarray(a))


def zeros(shape, dtype=np.float32):
    return ndarray(np.zeros(shape, dtype))


def _arg(a):
    if isinstance(a, ndarray):
        return a.ptr
    if isinstance(a, (np.floating, float)):
        return int(np.float32(a).view(np.uint32))
    return int(a) & 0xFFFFFFFFFFFFFFFF


class RawModule:
    """A PTX module loaded by the driver's JIT; log holds its info log."""

    def __init__(self, path):
        _init()
        with open(path, "rb") as f:
            image = f.read() + b"\0"
        info, err = ctypes.create_string_buffer(_LOG_BYTES), ctypes.create_string_buffer(_LOG_BYTES)
        opts = (ctypes.c_int * 5)(_JIT_INFO_LOG, _JIT_INFO_LOG_SIZE, _JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE, _JIT_LOG_VERBOSE)
        vals = (_vp * 5)(ctypes.cast(info, _vp), _vp(_LOG_BYTES), ctypes.cast(err, _vp), _vp(_LOG_BYTES), _vp(1))
        self._mod = _vp()
        res = _cu.cuModuleLoadDataEx(ctypes.byref(self._mod), image, 5, opts, vals)
        self.log = info.value.decode(errors="replace")
        if res != 0:
            log = err.value.decode(errors="replace").strip()
            _check(res, f"load {path}" + (f": JIT error log:\n{log}" if log else " (empty JIT error log)"))
        self._path = path

    def get_function(self, name):
        fn = _vp()
        _check(_cu.cuModuleGetFunction(ctypes.byref(fn), self._mod, name.encode()), f"kernel {name} in {self._path}")

        def launch(grid, block, args):
            g = tuple(grid) + (1,) * (3 - len(grid))
            b = tuple(block) + (1,) * (3 - len(block))
            vals = [ctypes.c_uint64(_arg(a)) for a in args]
            params = (_vp * max(1, len(vals)))(*[ctypes.cast(ctypes.pointer(v), _vp) for v in vals])
            _live.append((args, vals, params))
            _check(_cu.cuLaunchKernel(fn, *g, *b, 0, None, params, None), f"launch {name} grid {g} block {b}")

        return launch

"""A NumPy stand-in for the few PyTorch calls scripts/device/torchcupy.py
makes, so that the kernel checks' PyTorch front end runs on Sluice's CPU
emulator (`make cuda-emu`): "device" tensors are host NumPy buffers whose
addresses the emulated driver (libcudaemu.so, SLUICE_LIBCUDA) reads and
writes as a GPU's kernels would. Only uint8 tensors are made, as
torchcupy makes no others.
"""
import numpy as np

__version__ = "emulated"
uint8 = np.uint8


class Tensor:
    def __init__(self, a):
        self._a = a

    def to(self, device):
        if device != "cuda":
            raise ValueError(f"emutorch: device {device!r}")
        return Tensor(self._a.copy())

    def cpu(self):
        return Tensor(self._a.copy())

    def numpy(self):
        return self._a

    def data_ptr(self):
        return self._a.ctypes.data


def from_numpy(a):
    return Tensor(a)


def zeros(*shape, dtype=uint8, device="cpu"):
    if device != "cuda":
        raise ValueError(f"emutorch: device {device!r}")
    return Tensor(np.zeros(shape, dtype))


class cuda:
    @staticmethod
    def synchronize():
        pass  # every emulated launch has finished when it returns

    @staticmethod
    def is_available():
        return True

//go:build cudaemu && !cuda

package cuda

// #cgo CFLAGS: -DSLUICE_EMU_DRV
// #cgo CXXFLAGS: -std=c++20 -O1 -I${SRCDIR}/emu -Wno-unused-function
// #include <stdlib.h>
// #include <string.h>
// #include "emu/cuda.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// emuDriver runs the kernels' own source on the CPU (emu.cpp, emu/runtime.h):
// device memory is host memory, every launch runs to completion before it
// returns. Modules, launches and the stream go through the same cudrv.h
// calls as on a GPU, answered by emu.cpp's driver API. It presents itself as
// a 132-SM device, so the backend makes the choices (split attention, tile
// counts) it makes on an H200.
type emuDriver struct{ kernelSet }

func openDriver(opts Options) (driver, error) {
	d := &emuDriver{}
	if err := d.open(opts); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (*emuDriver) device() (string, int64, int) { return "CPU emulator", 0, 132 }

func (*emuDriver) alloc(bytes int64) (devPtr, error) {
	p := C.aligned_alloc(256, C.size_t((bytes+255)/256*256))
	if p == nil {
		return 0, fmt.Errorf("cuda emulator: allocate %d bytes: out of memory", bytes)
	}
	return devPtr(uintptr(p)), nil
}

func (*emuDriver) free(p devPtr) error { C.free(ptr(p)); return nil }

func (*emuDriver) zero(p devPtr, bytes int64) error {
	C.memset(ptr(p), 0, C.size_t(bytes))
	return nil
}

func (*emuDriver) upload(dst devPtr, src unsafe.Pointer, bytes int64) error {
	C.memcpy(ptr(dst), src, C.size_t(bytes))
	return nil
}

func (*emuDriver) download(dst unsafe.Pointer, src devPtr, bytes int64) error {
	C.memcpy(dst, ptr(src), C.size_t(bytes))
	return nil
}

// ptr turns an emulated device address (a C heap address, which Go's
// collector neither moves nor frees) back into a pointer.
func ptr(p devPtr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// emuPTXCompiles is how many PTX modules the emulator has compiled in this
// process (emu_ptx_compiles): a module served by a cache or a cubin is not
// counted.
func emuPTXCompiles() int64 { return int64(C.emu_ptx_compiles()) }

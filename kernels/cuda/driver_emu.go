//go:build cudaemu && !cuda

package cuda

// #cgo CXXFLAGS: -std=c++20 -O1 -I${SRCDIR}/emu -Wno-unused-function
// #include <stdlib.h>
// #include <string.h>
// #include "emu/api.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// emuDriver runs the kernels' own source on the CPU (emu.cpp, emu/runtime.h):
// device memory is host memory, every launch runs to completion before it
// returns. It presents itself as a 132-SM device, so the backend makes the
// choices (split attention, tile counts) it makes on an H200.
type emuDriver struct{}

func openDriver(opts Options) (driver, error) {
	for _, name := range modules {
		src, err := readPTX(opts.PTXDir, name)
		if err != nil {
			return nil, fmt.Errorf("cuda emulator: PTX module %s: %w", name, err)
		}
		for _, fn := range entries(string(src)) {
			if !(emuDriver{}).has(fn) {
				return nil, fmt.Errorf("cuda emulator: kernel %s of %s.ptx is not in emu.cpp's registry", fn, name)
			}
		}
	}
	return emuDriver{}, nil
}

func (emuDriver) device() (string, int64, int) { return "CPU emulator", 0, 132 }

func (emuDriver) has(fn string) bool {
	cs := C.CString(fn)
	defer C.free(unsafe.Pointer(cs))
	return C.emu_has(cs) != 0
}

func (emuDriver) alloc(bytes int64) (devPtr, error) {
	p := C.aligned_alloc(256, C.size_t((bytes+255)/256*256))
	if p == nil {
		return 0, fmt.Errorf("cuda emulator: allocate %d bytes: out of memory", bytes)
	}
	return devPtr(uintptr(p)), nil
}

func (emuDriver) free(p devPtr) error { C.free(ptr(p)); return nil }

func (emuDriver) zero(p devPtr, bytes int64) error {
	C.memset(ptr(p), 0, C.size_t(bytes))
	return nil
}

func (emuDriver) upload(dst devPtr, src unsafe.Pointer, bytes int64) error {
	C.memcpy(ptr(dst), src, C.size_t(bytes))
	return nil
}

func (d emuDriver) uploadAsync(dst devPtr, src unsafe.Pointer, bytes int64) error {
	return d.upload(dst, src, bytes)
}

func (emuDriver) download(dst unsafe.Pointer, src devPtr, bytes int64) error {
	C.memcpy(dst, ptr(src), C.size_t(bytes))
	return nil
}

func (emuDriver) launch(fn string, grid, block [3]int, args []uint64) error {
	cs := C.CString(fn)
	defer C.free(unsafe.Pointer(cs))
	var msg [512]C.char
	var a *C.uint64_t
	if len(args) > 0 {
		a = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	if C.emu_launch(cs, C.int(grid[0]), C.int(grid[1]), C.int(grid[2]), C.int(block[0]), C.int(block[1]), C.int(block[2]),
		a, C.int(len(args)), &msg[0], C.int(len(msg))) != 0 {
		return fmt.Errorf("cuda emulator: %s", C.GoString(&msg[0]))
	}
	return nil
}

func (emuDriver) sync() error { return nil }
func (emuDriver) close()      {}

// ptr turns an emulated device address (a C heap address, which Go's
// collector neither moves nor frees) back into a pointer.
func ptr(p devPtr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

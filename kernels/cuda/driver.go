//go:build cuda || cudaemu

package cuda

import (
	"time"
	"unsafe"
)

// devPtr is a device address (a CUdeviceptr; a host address under the
// emulator).
type devPtr uint64

// driver is the little of the CUDA driver API the backend uses, called only
// on the backend's locked goroutine. driver_cu.go implements it with
// gorgonia.org/cu on a GPU (build tag cuda); driver_emu.go runs the same
// kernels on the CPU through an emulator (build tag cudaemu), so that the
// backend and its tests run where no GPU is.
type driver interface {
	// device describes the device: name, memory in bytes, multiprocessors.
	device() (name string, memory int64, sms int)
	// has reports whether a kernel of that name was loaded.
	has(fn string) bool
	alloc(bytes int64) (devPtr, error)
	free(p devPtr) error
	zero(p devPtr, bytes int64) error
	// upload copies synchronously; uploadAsync is ordered on the stream
	// (src may be reused once it returns).
	upload(dst devPtr, src unsafe.Pointer, bytes int64) error
	uploadAsync(dst devPtr, src unsafe.Pointer, bytes int64) error
	// download waits for the stream, then copies.
	download(dst unsafe.Pointer, src devPtr, bytes int64) error
	// run queues a step's launches in order (each argument 8 bytes: a device
	// address, an integer, or a float32's bits in the low half; table
	// arguments are offsets rebased on tab). With each it waits after every
	// launch, so a fault names its kernel. Errors are *LaunchError.
	run(ls []launch, tab devPtr, each bool) error
	// replay queues the same launches as a CUDA graph: one cuGraphLaunch
	// when an identical step was captured before, else a capture first.
	replay(ls []launch, tab devPtr) error
	graphStats() GraphStats
	// streamPtr is the one stream (a CUstream) for a library's handle.
	streamPtr() unsafe.Pointer
	// jitTime: the JIT's own compile time and the modules' whole load time.
	jitTime() (compile, load time.Duration)
	// modules says how each module was loaded (cached, cubin, JIT).
	modules() []ModuleLoad
	// sync waits for the stream.
	sync() error
	close()
}

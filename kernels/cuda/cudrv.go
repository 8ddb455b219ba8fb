//go:build cuda || cudaemu

package cuda

// #include <stdlib.h>
// #include "cudrv.h"
import "C"

import (
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// DriverError is a failed CUDA driver call: which call, and the driver's
// code, name and description.
type DriverError struct {
	Call string // "cuLaunchKernel", "cuStreamSynchronize", ...
	Code int
	Name string // "CUDA_ERROR_ILLEGAL_ADDRESS"
	Msg  string // "an illegal memory access was encountered"
}

func (e *DriverError) Error() string {
	return fmt.Sprintf("%s: %s (%d: %s)", e.Call, e.Name, e.Code, e.Msg)
}

func cuError(call string, r C.CUresult) error {
	e := &DriverError{Call: call, Code: int(r), Name: "unknown error", Msg: "no description"}
	var s *C.char
	if C.cuGetErrorName(r, &s) == C.CUDA_SUCCESS && s != nil {
		e.Name = C.GoString(s)
	}
	if C.cuGetErrorString(r, &s) == C.CUDA_SUCCESS && s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// kernelSet is what both drivers share through cudrv.h: the PTX modules,
// their kernels by name, and the one stream every launch and async copy
// goes to. Used only on the backend's locked goroutine.
type kernelSet struct {
	stream  C.CUstream
	mods    []C.CUmodule
	fns     map[string]C.CUfunction
	cc      int           // the device's compute capability, major·10 + minor
	compile time.Duration // the JIT's wall time over all modules (modules.go)
	load    time.Duration // the modules' whole load time, the JIT's included
	loads   []ModuleLoad  // how each module was loaded
	// JIT log buffers while open loads the modules
	info, elog *C.char

	buf    []C.sl_launch // a step's launches as cudrv.h takes them
	graphs []graph       // instantiated whole steps (replay)
	seen   []uint64      // stepHash of the last steps run uncaptured (replay)
	clock  uint64
	stats  GraphStats
	// trace (SLUICE_CUDA_TRACE=1) names every launch on traceOut before
	// issuing it, one at a time: a hang's last line is its kernel.
	trace bool
}

// traceOut is where traced launches are named (a test swaps it).
var traceOut io.Writer = os.Stderr

// jitLogBytes is each JIT log buffer's size: ptxas reports are a few lines
// per kernel, an error log far less.
const jitLogBytes = 1 << 16

// open creates the stream (blocking: it also waits for the legacy-stream
// memsets and synchronous copies of zero and upload) and loads every
// module (loadModule: cached image, prebuilt cubin or JIT); a module the
// driver cannot compile fails with its error log.
func (k *kernelSet) open(opts Options) error {
	k.fns = map[string]C.CUfunction{}
	k.trace = os.Getenv("SLUICE_CUDA_TRACE") == "1"
	var s C.CUstream
	if r := C.cuStreamCreate(&s, C.CU_STREAM_DEFAULT); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda backend: stream: %w", cuError("cuStreamCreate", r))
	}
	k.stream = s
	if k.cc = int(C.sl_device_cc()); k.cc < 0 {
		return fmt.Errorf("cuda backend: the device's compute capability could not be read")
	}
	k.info, k.elog = (*C.char)(C.malloc(jitLogBytes)), (*C.char)(C.malloc(jitLogBytes))
	defer func() {
		C.free(unsafe.Pointer(k.info))
		C.free(unsafe.Pointer(k.elog))
		k.info, k.elog = nil, nil
	}()
	origin := "embedded"
	if opts.PTXDir != "" {
		origin = opts.PTXDir
	}
	for _, name := range modules {
		src, err := readPTX(opts.PTXDir, name)
		if err != nil {
			return fmt.Errorf("cuda backend: PTX module %s: %w", name, err)
		}
		m, ml, err := k.loadModule(name, src, ptxSum(opts.PTXDir, name, src))
		k.compile += ml.Compile
		k.load += ml.Load
		if err != nil {
			return fmt.Errorf("cuda backend: load module %s (%s PTX, sm_%d; %s): %w", name, origin, k.cc, ml.From, err)
		}
		k.mods = append(k.mods, m)
		k.loads = append(k.loads, ml)
		for _, fn := range entries(string(src)) {
			var f C.CUfunction
			cn := C.CString(fn)
			r := C.cuModuleGetFunction(&f, m, cn)
			C.free(unsafe.Pointer(cn))
			if r != C.CUDA_SUCCESS {
				return fmt.Errorf("cuda backend: kernel %s of module %s: %w", fn, name, cuError("cuModuleGetFunction", r))
			}
			k.fns[fn] = f
		}
	}
	return nil
}

// jitLog formats a non-empty JIT log for an error message, bounded: the
// first lines say what failed.
func jitLog(what, log string) string {
	log = strings.TrimSpace(log)
	if log == "" {
		return ""
	}
	if len(log) > 4000 {
		log = log[:4000] + " …"
	}
	return fmt.Sprintf("\nJIT %s log:\n%s", what, log)
}

func (k *kernelSet) has(fn string) bool { _, ok := k.fns[fn]; return ok }

// LaunchError is a failed step: the launch that failed (or, without
// SLUICE_CUDA_SYNC=1, the step whose wait reported an asynchronous fault).
type LaunchError struct {
	Kernel      string // empty when the fault surfaced only at the step's end
	Index, Of   int    // launch index within the step and the step's launch count
	Grid, Block [3]int
	Args        []uint64
	Err         error // a *DriverError
}

func (e *LaunchError) Error() string {
	if e.Kernel == "" {
		return fmt.Sprintf("cuda backend: step of %d launches: %v (a fault in any of them; SLUICE_CUDA_SYNC=1 names the kernel)", e.Of, e.Err)
	}
	var a strings.Builder
	for i, v := range e.Args {
		if i > 0 {
			a.WriteString(", ")
		}
		if v < 1<<20 {
			fmt.Fprintf(&a, "%d", v)
		} else {
			fmt.Fprintf(&a, "%#x", v)
		}
	}
	return fmt.Sprintf("cuda backend: kernel %s (launch %d of %d, grid %v block %v, args %s): %v", e.Kernel, e.Index+1, e.Of,
		e.Grid, e.Block, a.String(), e.Err)
}

func (e *LaunchError) Unwrap() error { return e.Err }

// fill converts ls into k.buf as cudrv.h takes them, table arguments
// rebased on tab.
func (k *kernelSet) fill(ls []launch, tab devPtr) error {
	k.buf = slices.Grow(k.buf[:0], len(ls))[:len(ls)]
	for i := range ls {
		l, c := &ls[i], &k.buf[i]
		f, ok := k.fns[l.fn]
		c.pad = 0
		if l.fn == gemmFn { // blas.go: a cuBLAS call, its entry points in its arguments
			ok, c.pad = true, C.SL_KIND_GEMM
		}
		if !ok {
			return fmt.Errorf("cuda backend: no kernel %s in the loaded PTX", l.fn)
		}
		c.f = f
		for j := range 3 {
			c.grid[j], c.block[j] = C.uint32_t(l.grid[j]), C.uint32_t(l.block[j])
		}
		c.nargs = C.int32_t(l.nargs)
		for j := range l.nargs {
			v := l.args[j]
			if l.tables&(1<<j) != 0 {
				v = uint64(tab) + 4*v
			}
			c.args[j] = C.uint64_t(v)
		}
	}
	return nil
}

// launchError builds the error of a failed sl_run or sl_capture: the
// launch that failed when there is one (failed ≥ 0), else the call.
func (k *kernelSet) launchError(ls []launch, call string, r C.CUresult, failed, afterSync C.int, msg string) error {
	if failed < 0 {
		return &LaunchError{Of: len(ls), Err: cuError(call, r)}
	}
	if afterSync != 0 {
		call = "cuStreamSynchronize"
	} else {
		call = "cuLaunchKernel"
	}
	var err error = cuError(call, r)
	if msg != "" {
		err = fmt.Errorf("%s: %w", msg, err)
	}
	i := int(failed)
	l := &ls[i]
	args := make([]uint64, l.nargs)
	for j := range args {
		args[j] = uint64(k.buf[i].args[j])
	}
	return &LaunchError{Kernel: l.fn, Index: i, Of: len(ls), Grid: l.grid, Block: l.block, Args: args, Err: err}
}

// run issues ls in order on the stream, table arguments rebased on tab;
// each waits after every launch. It does not wait at the end.
func (k *kernelSet) run(ls []launch, tab devPtr, each bool) error {
	if len(ls) == 0 {
		return nil
	}
	if err := k.fill(ls, tab); err != nil {
		return err
	}
	var failed, afterSync C.int
	var msg [512]C.char
	syncEach := C.int(0)
	if each {
		syncEach = 1
	}
	if k.trace {
		return k.runTraced(ls, syncEach)
	}
	r := C.sl_run(&k.buf[0], C.int(len(ls)), k.stream, syncEach, &failed, &afterSync, &msg[0], C.int(len(msg)))
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return k.launchError(ls, "cuLaunchKernel", r, failed, afterSync, C.GoString(&msg[0]))
}

// runTraced issues k.buf's launches (filled from ls) one sl_run each, each
// named on traceOut first, so that the last name printed before a hang or
// a fault is the kernel's.
func (k *kernelSet) runTraced(ls []launch, syncEach C.int) error {
	var failed, afterSync C.int
	var msg [512]C.char
	for i := range ls {
		l := &ls[i]
		fmt.Fprintf(traceOut, "cuda trace: launch %d/%d %s grid %v block %v\n", i+1, len(ls), l.fn, l.grid, l.block)
		r := C.sl_run(&k.buf[i], 1, k.stream, syncEach, &failed, &afterSync, &msg[0], C.int(len(msg)))
		if r != C.CUDA_SUCCESS {
			if failed >= 0 {
				failed += C.int(i)
			}
			return k.launchError(ls, "cuLaunchKernel", r, failed, afterSync, C.GoString(&msg[0]))
		}
	}
	return nil
}

// jitTime is what loading every module took: compile the JIT's wall time
// (zero when every module came from the cache or a prebuilt cubin), load
// the whole of loadModule's calls.
func (k *kernelSet) jitTime() (compile, load time.Duration) { return k.compile, k.load }

func (k *kernelSet) modules() []ModuleLoad { return k.loads }

// A graph is one whole step captured and instantiated: the same launches
// with the same arguments (table arguments are offsets into the same arena;
// the tables' contents are copied before each replay, so positions, slots
// and block tables may change) replay it with one cuGraphLaunch.
type graph struct {
	exec     C.CUgraphExec
	launches []launch
	tab      devPtr
	used     uint64 // k.clock when last replayed
}

// maxGraphs bounds the cache: decode steps of a few batch shapes (and a
// split-attention grid that changes as contexts grow) each take one.
const maxGraphs = 8

// GraphStats counts whole steps captured into CUDA graphs and replayed,
// and those run as plain launches because they were new (Once): a step is
// captured the second time its launches are seen, so that prefill chunks,
// whose shapes rarely repeat, do not pay a capture each.
type GraphStats struct{ Captures, Replays, Once int64 }

// seenSteps is how many uncaptured steps' fingerprints replay remembers.
const seenSteps = 16

// stepHash fingerprints a step's launches (with the table arena they read).
func stepHash(ls []launch, tab devPtr) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	maphash.WriteComparable(&h, tab)
	for i := range ls {
		maphash.WriteComparable(&h, ls[i])
	}
	return h.Sum64()
}

var hashSeed = maphash.MakeSeed()

// replay runs ls as a CUDA graph: an instantiated one of the same launches
// if the cache has it, else, when the same launches ran before (a decode
// step repeating), a new capture (evicting the least recently used), else
// the launches as they are, remembered for next time. It does not wait.
func (k *kernelSet) replay(ls []launch, tab devPtr) error {
	if len(ls) == 0 {
		return nil
	}
	k.clock++
	for i := range k.graphs {
		g := &k.graphs[i]
		if g.tab == tab && slices.Equal(g.launches, ls) {
			g.used = k.clock
			k.stats.Replays++
			if r := C.cuGraphLaunch(g.exec, k.stream); r != C.CUDA_SUCCESS {
				return &LaunchError{Of: len(ls), Err: cuError("cuGraphLaunch", r)}
			}
			return nil
		}
	}
	if h := stepHash(ls, tab); !slices.Contains(k.seen, h) {
		if len(k.seen) == seenSteps {
			k.seen = k.seen[1:]
		}
		k.seen = append(k.seen, h)
		k.stats.Once++
		return k.run(ls, tab, false)
	}
	if err := k.fill(ls, tab); err != nil {
		return err
	}
	var exec C.CUgraphExec
	var failed, afterSync C.int
	var msg [512]C.char
	r := C.sl_capture(&k.buf[0], C.int(len(ls)), k.stream, &exec, &failed, &afterSync, &msg[0], C.int(len(msg)))
	if r != C.CUDA_SUCCESS {
		return k.launchError(ls, "graph capture (cuStreamBeginCapture … cuGraphInstantiateWithFlags)", r, failed, afterSync, C.GoString(&msg[0]))
	}
	k.stats.Captures++
	if len(k.graphs) == maxGraphs {
		old := 0
		for i := range k.graphs {
			if k.graphs[i].used < k.graphs[old].used {
				old = i
			}
		}
		C.cuGraphExecDestroy(k.graphs[old].exec)
		k.graphs = slices.Delete(k.graphs, old, old+1)
	}
	k.graphs = append(k.graphs, graph{exec: exec, launches: slices.Clone(ls), tab: tab, used: k.clock})
	if r := C.cuGraphLaunch(exec, k.stream); r != C.CUDA_SUCCESS {
		return &LaunchError{Of: len(ls), Err: cuError("cuGraphLaunch", r)}
	}
	return nil
}

func (k *kernelSet) graphStats() GraphStats { return k.stats }

func (k *kernelSet) streamPtr() unsafe.Pointer { return unsafe.Pointer(k.stream) }

func (k *kernelSet) uploadAsync(dst devPtr, src unsafe.Pointer, bytes int64) error {
	if r := C.cuMemcpyHtoDAsync(C.CUdeviceptr(dst), src, C.size_t(bytes), k.stream); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda backend: queue a copy of %d bytes: %w", bytes, cuError("cuMemcpyHtoDAsync", r))
	}
	return nil
}

func (k *kernelSet) sync() error {
	if r := C.cuStreamSynchronize(k.stream); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda backend: synchronize: %w", cuError("cuStreamSynchronize", r))
	}
	return nil
}

// close unloads the modules and destroys the stream; errors are of no use
// at this point (the context's destruction frees what is left).
func (k *kernelSet) close() {
	for _, g := range k.graphs {
		C.cuGraphExecDestroy(g.exec)
	}
	k.graphs = nil
	for _, m := range k.mods {
		C.cuModuleUnload(m)
	}
	k.mods = nil
	if k.stream != nil {
		C.cuStreamDestroy(k.stream)
		k.stream = nil
	}
}

//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("cuda backend: closed")

// Options configure New. The zero value is device 0 with the embedded PTX.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// PTXDir, when set, is a directory of <module>.ptx files loaded instead
	// of the embedded ones (PTX built on the GPU machine for its own arch).
	// The environment variable SLUICE_CUDA_PTX_DIR sets it too.
	PTXDir string
	// SyncEach waits for the stream after every kernel launch, so that a
	// fault (an illegal address, a trap) is reported with the kernel that
	// caused it and its arguments instead of at the end of the step. Slow:
	// for diagnosis. The environment variable SLUICE_CUDA_SYNC=1 sets it too.
	SyncEach bool
	// NoGraphs runs every step as plain launches. By default a step whose
	// launches repeat (decode: its tables change, not its launches) is
	// captured into a CUDA graph the second time it is seen and replayed
	// with one launch after, which removes the launch gaps of a batch-1
	// step. The environment variable SLUICE_CUDA_GRAPHS=0 sets it too;
	// SyncEach turns graphs off.
	NoGraphs bool
	// GEMVMaxRows: matmuls of at most this many rows run the decode (GEMV)
	// kernels, larger ones the tensor-core tiles. Default 8, the most the
	// GEMV kernels take in one pass.
	GEMVMaxRows int
	// BLAS chooses the GEMM of F16/BF16 weights above GEMVMaxRows rows
	// (blas.go): "" finds libcublas.so.13 or .so.12 on the loader's path,
	// "off" keeps the mma kernels, a file or directory must load. The
	// environment variable SLUICE_CUBLAS sets it too.
	BLAS string
}

// Backend is the CUDA implementation of kernels.Backend. Its methods are
// called from one goroutine (kernels' concurrency rule); the CUDA calls
// themselves run on b.calls' goroutine.
type Backend struct {
	opts   Options
	calls  chan func()
	exited chan struct{}
	closed bool

	// owned by the CUDA goroutine
	drv    driver
	allocs []devPtr
	arena  devArena // device copy of the step's host tables
	graphs bool     // repeated steps run as CUDA graphs (Options.NoGraphs, UseGraphs)
	tokens devBuf   // sampled token ids
	work   devBuf   // penalized copies of logit rows (Sample)
	half   devBuf   // a step's GEMM inputs rounded to F16/BF16 (blas.go)

	moe    moeScratch // MoEFFN's expert rows (modelops.go)
	capped capScratch // CappedAttention's scores (modelops.go)

	blas    *blasLib // cuBLAS, when loaded (read-only after New)
	blasWhy string   // why not
	gemms   atomic.Int64
	ones    devPtr // onesLen F32 ones: the norm weight of GEMVs without a folded RMSNorm

	step     step         // launches recorded since the last flush
	launches atomic.Int64 // kernel launches issued since New
	d2h      atomic.Int64 // bytes downloaded since New (devsample.go)
	name     string       // read-only after New, as are total and sms
	total    int64
	sms      int // streaming multiprocessors: how many blocks fill the GPU
	// the modules' JIT compile and load times (kernelSet.jitTime), set by init
	jitCompile, jitLoad time.Duration
	modLoads            []ModuleLoad // how each module was loaded, set by init
}

// New creates a context on the device, loads the kernels and starts the
// goroutine that owns them. The CLI's --backend cuda calls New(Options{Device: n}).
func New(opts Options) (*Backend, error) {
	if opts.PTXDir == "" {
		opts.PTXDir = os.Getenv("SLUICE_CUDA_PTX_DIR")
	}
	// SLUICE_CUDA_TRACE=1 names every launch before it (cudrv.go), each
	// waited for as SyncEach does
	if os.Getenv("SLUICE_CUDA_SYNC") == "1" || os.Getenv("SLUICE_CUDA_TRACE") == "1" {
		opts.SyncEach = true
	}
	if os.Getenv("SLUICE_CUDA_GRAPHS") == "0" {
		opts.NoGraphs = true
	}
	if opts.GEMVMaxRows <= 0 || opts.GEMVMaxRows > 8 {
		opts.GEMVMaxRows = 8
	}
	b := &Backend{opts: opts, calls: make(chan func()), exited: make(chan struct{}), graphs: !opts.NoGraphs}
	started := make(chan error, 1)
	go b.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return b, nil
}

// loop is the CUDA goroutine: it creates the context on its locked thread,
// then runs submitted calls until Close closes b.calls.
func (b *Backend) loop(started chan<- error) {
	runtime.LockOSThread()
	defer close(b.exited)
	if err := b.init(); err != nil {
		b.release()
		started <- err
		return
	}
	started <- nil
	for f := range b.calls {
		f()
	}
	b.release()
}

func (b *Backend) init() error {
	drv, err := openDriver(b.opts)
	if err != nil {
		return err
	}
	b.drv = drv
	b.name, b.total, b.sms = drv.device()
	b.jitCompile, b.jitLoad = drv.jitTime()
	b.modLoads = drv.modules()
	if err := b.openBLAS(); err != nil {
		return err
	}
	b.logGEMMPath()
	ones := make([]float32, onesLen)
	for i := range ones {
		ones[i] = 1
	}
	if b.ones, err = b.alloc(4 * onesLen); err != nil {
		return err
	}
	return b.drv.upload(b.ones, unsafe.Pointer(&ones[0]), 4*onesLen)
}

// release frees everything on the CUDA goroutine; errors are of no use here
// (closing the driver frees what a failed call left behind).
func (b *Backend) release() {
	if b.drv == nil {
		return
	}
	for _, p := range b.allocs {
		_ = b.drv.free(p)
	}
	b.allocs = nil
	b.closeBLAS()
	b.drv.close()
}

// do runs f on the CUDA goroutine after the recorded launches, and waits.
func (b *Backend) do(f func() error) error {
	if b.closed {
		return ErrClosed
	}
	errc := make(chan error, 1)
	b.calls <- func() {
		if err := b.flush(); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}
	return <-errc
}

func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU: its name and memory in GiB.
func (b *Backend) Device() string {
	return fmt.Sprintf("%s (%.0f GiB)", b.name, float64(b.total)/(1<<30))
}

// tensor is a device allocation: F32 scratch or a weight in its block layout.
type tensor struct {
	shape []int
	dtype kernels.DType
	ptr   devPtr
	bytes int64
}

func (t *tensor) Shape() []int         { return t.shape }
func (t *tensor) DType() kernels.DType { return t.dtype }
func (t *tensor) cols() int            { return t.shape[len(t.shape)-1] }
func (t *tensor) rows() int {
	r := 1
	for _, d := range t.shape[:len(t.shape)-1] {
		r *= d
	}
	return r
}

func asCUDA(t kernels.Tensor) (*tensor, error) {
	c, ok := t.(*tensor)
	if !ok || c == nil {
		return nil, fmt.Errorf("cuda backend: tensor %T was not made by this backend", t)
	}
	return c, nil
}

// alloc runs on the CUDA goroutine.
func (b *Backend) alloc(bytes int64) (devPtr, error) {
	p, err := b.drv.alloc(bytes)
	if err != nil {
		return 0, err
	}
	b.allocs = append(b.allocs, p)
	return p, nil
}

// Upload copies a weight to the device as it is stored (block layout kept).
func (b *Backend) Upload(t kernels.HostTensor) (kernels.Tensor, error) {
	if !t.DType.Known() || t.DType == kernels.Q8_K {
		return nil, fmt.Errorf("cuda backend: tensor %s: unsupported type %v", t.Name, t.DType)
	}
	if len(t.Shape) == 0 {
		return nil, fmt.Errorf("cuda backend: tensor %s: no shape", t.Name)
	}
	ct := &tensor{shape: append([]int(nil), t.Shape...), dtype: t.DType, bytes: int64(len(t.Data))}
	if cols := ct.cols(); cols%t.DType.BlockElems() != 0 {
		return nil, fmt.Errorf("cuda backend: tensor %s: row of %d elements is not a whole number of %v blocks", t.Name, cols, t.DType)
	}
	if want := ct.rows() * t.DType.RowBytes(ct.cols()); len(t.Data) != want || want == 0 {
		return nil, fmt.Errorf("cuda backend: tensor %s: %d bytes, shape %v of %v needs %d", t.Name, len(t.Data), t.Shape, t.DType, want)
	}
	err := b.do(func() error {
		p, err := b.alloc(ct.bytes)
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		ct.ptr = p
		if err := b.drv.upload(p, unsafe.Pointer(&t.Data[0]), ct.bytes); err != nil {
			return fmt.Errorf("upload %s: %w", t.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ct, nil
}

// Alloc returns zeroed F32 scratch on the device.
func (b *Backend) Alloc(shape ...int) (kernels.Tensor, error) {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("cuda backend: alloc %v: dimensions must be positive", shape)
		}
		n *= int64(d)
	}
	if len(shape) == 0 {
		return nil, fmt.Errorf("cuda backend: alloc: no shape")
	}
	ct := &tensor{shape: append([]int(nil), shape...), dtype: kernels.F32, bytes: 4 * n}
	err := b.do(func() error {
		p, err := b.alloc(ct.bytes)
		if err != nil {
			return err
		}
		ct.ptr = p
		return b.drv.zero(p, ct.bytes)
	})
	if err != nil {
		return nil, err
	}
	return ct, nil
}

// kvStore keeps, per layer, K and V as [Blocks*BlockSize, KVHeads*HeadDim]
// F16 — the CPU layout at half the bytes — in one allocation:
//
//	[ layer 0 K | layer 0 V | layer 1 K | layer 1 V | ... | split partials | counters
//	  | decode partials | decode counters ]
//
// The tail holds the split-context attention's partial results (partBytes)
// and its per-item counters of finished splits (counterBytes), then the
// same for paged_decode's partitions (decodeScratch, decodeCounters).
type kvStore struct {
	cfg      kernels.KVConfig
	base     devPtr
	perLayer int64 // bytes of one layer's K (or V)
	part     devPtr
	counters devPtr // int32 per work item × KV head: splits finished (zero between launches)
	// paged_decode's partials and counters (decodeScratch, decodeCounters)
	decPart, decCounters devPtr
	decParts             int
}

// partBytes is the split-context scratch: 1,000 partial results of
// attention.cu's PART floats, several times what one step uses; with at
// least two splits per work item, at most 500 items × KV heads have a
// counter each (counterBytes).
const (
	partBytes    = 1000 * partFloats * 4
	counterBytes = 512 * 4
)

func (s *kvStore) Config() kernels.KVConfig { return s.cfg }

func (s *kvStore) layer(l int) (k, v devPtr) {
	k = s.base + devPtr(2*int64(l)*s.perLayer)
	return k, k + devPtr(s.perLayer)
}

func (b *Backend) NewKVStore(cfg kernels.KVConfig) (kernels.KVStore, error) {
	if cfg.Layers <= 0 || cfg.Blocks <= 0 || cfg.BlockSize <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 {
		return nil, fmt.Errorf("cuda backend: invalid KV config %+v", cfg)
	}
	if _, dec := decodeShape(cfg.HeadDim); cfg.HeadDim%8 != 0 || (cfg.HeadDim > 128 && !dec) {
		return nil, fmt.Errorf("cuda backend: head size %d: the attention kernels take multiples of 8 up to 128, and 256", cfg.HeadDim)
	}
	s := &kvStore{cfg: cfg, perLayer: 2 * int64(cfg.Blocks) * int64(cfg.BlockSize) * int64(cfg.KVHeads*cfg.HeadDim)}
	parts, floats := decodeScratch(cfg)
	s.decParts = parts
	decBytes := 4 * int64(parts) * int64(cfg.KVHeads) * int64(floats)
	err := b.do(func() error {
		total := 2*int64(cfg.Layers)*s.perLayer + partBytes + counterBytes + decBytes + 4*decodeCounters
		p, err := b.alloc(total)
		if err != nil {
			return fmt.Errorf("KV pool: %w", err)
		}
		s.base, s.part = p, p+devPtr(2*int64(cfg.Layers)*s.perLayer)
		s.counters = s.part + devPtr(partBytes)
		s.decPart = s.counters + devPtr(counterBytes)
		s.decCounters = s.decPart + devPtr(decBytes)
		return b.drv.zero(p, total)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Read runs everything recorded, waits for it, and copies t's first len(dst)
// values to dst.
func (b *Backend) Read(t kernels.Tensor, dst []float32) error {
	ct, err := asCUDA(t)
	if err != nil {
		return err
	}
	if ct.dtype != kernels.F32 {
		return fmt.Errorf("cuda backend: read: tensor is %v, not F32", ct.dtype)
	}
	if int64(len(dst))*4 > ct.bytes {
		return fmt.Errorf("cuda backend: read %d values from a tensor of %d", len(dst), ct.bytes/4)
	}
	return b.do(func() error {
		if len(dst) == 0 {
			return nil
		}
		return b.download(unsafe.Pointer(&dst[0]), ct.ptr, int64(len(dst))*4)
	})
}

// Launches is how many kernel launches the backend has issued since New (a
// benchmark divides it by the steps it ran).
func (b *Backend) Launches() int64 { return b.launches.Load() }

// UseGraphs switches CUDA graphs on or off for the steps after it (a
// benchmark measures both on one loaded model).
func (b *Backend) UseGraphs(on bool) error {
	return b.do(func() error { b.graphs = on; return nil })
}

// GraphStats reports how many steps were captured into CUDA graphs and how
// many replayed one.
func (b *Backend) GraphStats() (GraphStats, error) {
	var s GraphStats
	err := b.do(func() error { s = b.drv.graphStats(); return nil })
	return s, err
}

// Sync runs everything recorded and waits for it (benchmarks time steps with it).
func (b *Backend) Sync() error { return b.do(func() error { return nil }) }

// Close runs what is still recorded, then frees every allocation, the
// modules, the stream and the context. Tensors made by b are invalid after.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	err := b.do(func() error { return nil })
	b.closed = true
	close(b.calls)
	<-b.exited
	return err
}

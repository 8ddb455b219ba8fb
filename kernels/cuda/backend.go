//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"gorgonia.org/cu"
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
	// GEMVMaxRows: matmuls of at most this many rows run the decode (GEMV)
	// kernels, larger ones the tensor-core tiles. Default 8, the most the
	// GEMV kernels take in one pass.
	GEMVMaxRows int
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
	ctx    cu.CUContext
	stream cu.Stream
	mods   []cu.Module
	allocs []cu.DevicePtr
	arena  devArena // device copy of the step's host tables
	tokens devBuf   // sampled token ids

	fn    map[string]cu.Function // read-only after New
	step  step                   // launches recorded since the last flush
	name  string
	total int64
	sms   int // streaming multiprocessors: how many blocks fill the GPU
}

// New creates a context on the device, loads the kernels and starts the
// goroutine that owns them. The CLI's --backend cuda calls New(Options{Device: n}).
func New(opts Options) (*Backend, error) {
	if opts.PTXDir == "" {
		opts.PTXDir = os.Getenv("SLUICE_CUDA_PTX_DIR")
	}
	if opts.GEMVMaxRows <= 0 || opts.GEMVMaxRows > 8 {
		opts.GEMVMaxRows = 8
	}
	b := &Backend{opts: opts, calls: make(chan func()), exited: make(chan struct{})}
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
	dev, err := cu.GetDevice(b.opts.Device)
	if err != nil {
		return fmt.Errorf("cuda backend: device %d: %w", b.opts.Device, err)
	}
	if b.name, err = dev.Name(); err != nil {
		return fmt.Errorf("cuda backend: device %d name: %w", b.opts.Device, err)
	}
	if b.total, err = dev.TotalMem(); err != nil {
		return fmt.Errorf("cuda backend: device %d memory: %w", b.opts.Device, err)
	}
	if b.sms, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return fmt.Errorf("cuda backend: device %d SM count: %w", b.opts.Device, err)
	}
	if b.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuda backend: context on device %d: %w", b.opts.Device, err)
	}
	// A blocking stream: it also waits for the legacy-stream memsets and
	// copies that Upload and Alloc issue.
	if b.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("cuda backend: stream: %w", err)
	}
	b.fn, b.mods, err = loadModules(b.opts.PTXDir)
	return err
}

// release frees everything on the CUDA goroutine; errors are of no use here
// (the context's destruction frees what a failed call left behind).
func (b *Backend) release() {
	for _, p := range b.allocs {
		_ = cu.MemFree(p)
	}
	b.allocs = nil
	for _, m := range b.mods {
		_ = m.Unload()
	}
	if b.stream != (cu.Stream{}) {
		_ = b.stream.Destroy()
	}
	if b.ctx != (cu.CUContext{}) {
		_ = b.ctx.Destroy()
	}
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
	ptr   cu.DevicePtr
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
func (b *Backend) alloc(bytes int64) (cu.DevicePtr, error) {
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("cuda backend: allocate %d bytes: %w", bytes, err)
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
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&t.Data[0]), ct.bytes); err != nil {
			return fmt.Errorf("cuda backend: upload %s: %w", t.Name, err)
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
		if err := cu.MemsetD8(p, 0, ct.bytes); err != nil {
			return fmt.Errorf("cuda backend: clear scratch: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ct, nil
}

// kvStore keeps, per layer, K and V as [Blocks*BlockSize, KVHeads*HeadDim]
// F16 — the CPU layout at half the bytes — in one allocation:
//
//	[ layer 0 K | layer 0 V | layer 1 K | layer 1 V | ... | split partials ]
//
// The tail holds the split-context attention's partial results (partBytes).
type kvStore struct {
	cfg      kernels.KVConfig
	base     cu.DevicePtr
	perLayer int64 // bytes of one layer's K (or V)
	part     cu.DevicePtr
}

// partBytes is the split-context scratch: 1,000 partial results of
// attention.cu's PART floats, several times what one step uses.
const partBytes = 1000 * partFloats * 4

func (s *kvStore) Config() kernels.KVConfig { return s.cfg }

func (s *kvStore) layer(l int) (k, v cu.DevicePtr) {
	k = s.base + cu.DevicePtr(2*int64(l)*s.perLayer)
	return k, k + cu.DevicePtr(s.perLayer)
}

func (b *Backend) NewKVStore(cfg kernels.KVConfig) (kernels.KVStore, error) {
	if cfg.Layers <= 0 || cfg.Blocks <= 0 || cfg.BlockSize <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 {
		return nil, fmt.Errorf("cuda backend: invalid KV config %+v", cfg)
	}
	if cfg.HeadDim%8 != 0 || cfg.HeadDim > 128 {
		return nil, fmt.Errorf("cuda backend: head size %d: the attention kernel takes multiples of 8 up to 128", cfg.HeadDim)
	}
	s := &kvStore{cfg: cfg, perLayer: 2 * int64(cfg.Blocks) * int64(cfg.BlockSize) * int64(cfg.KVHeads*cfg.HeadDim)}
	err := b.do(func() error {
		total := 2*int64(cfg.Layers)*s.perLayer + partBytes
		p, err := b.alloc(total)
		if err != nil {
			return fmt.Errorf("KV pool: %w", err)
		}
		s.base, s.part = p, p+cu.DevicePtr(total-partBytes)
		if err := cu.MemsetD8(p, 0, total); err != nil {
			return fmt.Errorf("cuda backend: clear KV pool: %w", err)
		}
		return nil
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
		if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), ct.ptr, int64(len(dst))*4); err != nil {
			return fmt.Errorf("cuda backend: read: %w", err)
		}
		return nil
	})
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

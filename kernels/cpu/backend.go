package cpu

import (
	"fmt"
	"runtime"

	"github.com/sluicehq/sluice/kernels"
)

// Backend is the CPU implementation of kernels.Backend.
type Backend struct {
	workers
	rope       map[*tensor]*ropeTable // cos/sin per position, per frequency vector
	attn       attnScratch            // Attention's reusable state (attention.go)
	swiglu     swigluScratch          // SwiGLU's (ops.go)
	moe        moeScratch             // MoEFFN's (moe.go)
	geglu      gegluScratch           // GeGLU's (gemma.go)
	prompt     []bool                 // SetPromptRows' flags, one per batch row
	matArgs    []matArgs              // MatMuls' checked operands, kept to reuse
	rowScratch []byte                 // GetRows' row of a grouped matrix in the file's layout
	// fileLayout keeps every weight as the file lays it out (KeepFileLayout).
	fileLayout bool
	weights    weightArena // what Upload copies matrices into
}

// KeepFileLayout makes later Uploads keep every weight in the model file's
// layout, as llama.cpp's --no-repack does: no Q4_1 or Q8_0 regrouping
// (x16pack.go) and no copy onto huge pages (weightarena.go), so the weights
// take no memory of their own, and generated
// rows run the file layout's kernels, whose arithmetic rounds per partial
// sum (results within rounding of the grouped kernels', not their bits;
// speculative verify steps of 8 rows take half again as long, BENCHMARKS.md
// session 10). It also gives benchmarks the two layouts side by side.
func (b *Backend) KeepFileLayout() { b.fileLayout = true }

// New returns a CPU backend that splits large operations over threads
// goroutines: the caller's and threads-1 helpers that live until Close.
func New(threads int) *Backend {
	b := &Backend{workers: newWorkers(threads), rope: map[*tensor]*ropeTable{}}
	if b.pool != nil {
		// A backend dropped without Close must not leave its helpers parked
		// forever; they refer to the pool only, so b can still be collected.
		runtime.AddCleanup(b, (*pool).stop, b.pool)
	}
	return b
}

func (b *Backend) Name() string { return "cpu" }

// SetPromptRows flags the batch rows that are prompt tokens: MatMul over
// those rows uses the tiled kernels where the CPU has them (kernels.PromptRows).
func (b *Backend) SetPromptRows(prompt []bool) { b.prompt = append(b.prompt[:0], prompt...) }

// Threads is the number of goroutines large operations are split over.
func (b *Backend) Threads() int { return b.threads }

// Upload copies a quantized or half-precision matrix onto huge pages
// (weightarena.go), regrouping a Q4_1 or Q8_0 one where the grouped kernels
// run (x16pack.go), and gives the source's pages back. Other weights (F32,
// vectors, MoE expert stacks, and every weight after KeepFileLayout) keep
// referring to t.Data, used where the model file's mmap put it; F32 data is
// reinterpreted in place when aligned.
func (b *Backend) Upload(t kernels.HostTensor) (kernels.Tensor, error) {
	if !t.DType.Known() {
		return nil, fmt.Errorf("cpu backend: tensor %s: unsupported type %v", t.Name, t.DType)
	}
	if len(t.Shape) == 0 {
		return nil, fmt.Errorf("cpu backend: tensor %s: no shape", t.Name)
	}
	ct := &tensor{shape: append([]int(nil), t.Shape...), dtype: t.DType, raw: t.Data}
	cols := ct.cols()
	if cols%t.DType.BlockElems() != 0 {
		return nil, fmt.Errorf("cpu backend: tensor %s: row of %d elements is not a whole number of %v blocks", t.Name, cols, t.DType)
	}
	if want := ct.rows() * t.DType.RowBytes(cols); len(t.Data) != want {
		return nil, fmt.Errorf("cpu backend: tensor %s: %d bytes, shape %v of %v needs %d", t.Name, len(t.Data), t.Shape, t.DType, want)
	}
	if t.DType == kernels.F32 {
		ct.f32 = bytesToF32(t.Data)
	}
	if b.fileLayout || len(t.Shape) != 2 || t.DType == kernels.F32 {
		return ct, nil
	}
	// A copy on huge pages (weightarena.go): the mmap stays as the file has
	// it, its pages given back.
	if groupedRuns(t.DType) {
		ct.layout = grouped
		ct.raw = packGroupedInto(b.weights.take, t.DType, t.Data, ct.rows(), cols/t.DType.BlockElems(), grouped)
	} else {
		ct.raw = b.weights.take(len(t.Data))
		copy(ct.raw, t.Data)
	}
	releaseSource(t.Data)
	return ct, nil
}

// Alloc returns zeroed F32 scratch.
func (b *Backend) Alloc(shape ...int) (kernels.Tensor, error) {
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("cpu backend: alloc %v: dimensions must be positive", shape)
		}
		n *= d
	}
	return &tensor{shape: append([]int(nil), shape...), dtype: kernels.F32, f32: make([]float32, n)}, nil
}

// kvStore keeps K and V per layer as [Blocks*BlockSize, KVHeads*HeadDim] F16
// (see kvhalf.go for why half precision).
type kvStore struct {
	cfg  kernels.KVConfig
	k, v [][]uint16
}

func (s *kvStore) Config() kernels.KVConfig { return s.cfg }

func (b *Backend) NewKVStore(cfg kernels.KVConfig) (kernels.KVStore, error) {
	if cfg.Layers <= 0 || cfg.Blocks <= 0 || cfg.BlockSize <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 {
		return nil, fmt.Errorf("cpu backend: invalid KV config %+v", cfg)
	}
	per := cfg.Blocks * cfg.BlockSize * cfg.KVHeads * cfg.HeadDim
	s := &kvStore{cfg: cfg, k: make([][]uint16, cfg.Layers), v: make([][]uint16, cfg.Layers)}
	for l := range cfg.Layers {
		s.k[l] = make([]uint16, per)
		s.v[l] = make([]uint16, per)
	}
	return s, nil
}

// Read copies; CPU kernels are synchronous, so there is nothing to wait for.
func (b *Backend) Read(t kernels.Tensor, dst []float32) error {
	ct, err := asCPU(t)
	if err != nil {
		return err
	}
	if ct.f32 == nil {
		return fmt.Errorf("cpu backend: read: tensor is %v, not F32", ct.dtype)
	}
	if len(dst) > len(ct.f32) {
		return fmt.Errorf("cpu backend: read %d values from a tensor of %d", len(dst), len(ct.f32))
	}
	copy(dst, ct.f32)
	return nil
}

// Close stops the helper goroutines. The backend stays usable, single-threaded.
func (b *Backend) Close() error {
	b.rope = map[*tensor]*ropeTable{}
	b.workers.close()
	return nil
}

//go:build cuda || cudaemu

package cuda

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "cudrv.h"
import "C"

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// gemmFn names a recorded cuBLAS GEMM among a step's launches: fill gives it
// sl_launch kind SL_KIND_GEMM, and sl_run calls cuBLAS instead of a kernel.
const gemmFn = "cublas_gemm"

// blasLib is a cuBLAS loaded at run time (blas.h) with a handle on the
// backend's context. Set once on the CUDA goroutine before New returns,
// read-only after.
type blasLib struct {
	c       C.sl_blas
	path    string
	version int
	// capture: the handle has a workspace of ours (blasWorkspace bytes), so
	// steps with GEMMs are captured into CUDA graphs like any other step;
	// cleared if a capture with GEMMs ever fails (flush)
	capture bool
}

// blasWorkspace is the cuBLAS workspace the backend sets (what PyTorch
// gives a handle on Hopper): cuBLAS then allocates nothing during a
// capture, the condition for recording its GEMMs into a graph.
const blasWorkspace = 32 << 20

// blasStep is what a step's cuBLAS GEMMs need at flush: one F16/BF16 copy of
// their input, at most bytes long, in b.half; refs are the launch arguments
// that hold an offset into it.
type blasStep struct {
	used  bool
	bytes int64
	refs  [][2]int // launch index, argument index
	// the last conversion, reused by a GEMM of the same input right after
	// (q, k and v; gate and up)
	lastX, lastElems uint64
	lastFn           string
	lastGemm         int
}

func (s *blasStep) reset() {
	s.used, s.bytes, s.refs, s.lastGemm = false, 0, s.refs[:0], -1
}

// blasNames are the libraries tried when none is named, newest first.
var blasNames = []string{"libcublas.so.13", "libcublas.so.12"}

// blasCandidates turns a BLAS setting (a library file or a directory, as in
// a pip wheel's nvidia/cublas/lib) into libraries to try, each with the
// libcublasLt to load before it.
func blasCandidates(spec string) [][2]string {
	var c [][2]string
	if fi, err := os.Stat(spec); err == nil && fi.IsDir() {
		for _, n := range blasNames {
			c = append(c, [2]string{filepath.Join(spec, n), filepath.Join(spec, strings.Replace(n, "libcublas", "libcublasLt", 1))})
		}
		return c
	}
	lt := filepath.Join(filepath.Dir(spec), strings.Replace(filepath.Base(spec), "libcublas", "libcublasLt", 1))
	if lt == spec || !strings.Contains(spec, "/") {
		lt = ""
	}
	return [][2]string{{spec, lt}}
}

// openBLAS runs on the CUDA goroutine once the context is current. With
// Options.BLAS (or SLUICE_CUBLAS) naming a library or directory, that
// cuBLAS must load; "off" keeps the mma kernels; unset, the loader's
// libcublas.so.13 or .so.12 is used when there is one (blasAuto: never under
// the emulator, whose device addresses a real cuBLAS cannot read).
func (b *Backend) openBLAS() error {
	spec := b.opts.BLAS
	if spec == "" {
		spec = os.Getenv("SLUICE_CUBLAS")
	}
	if spec == "off" {
		b.blasWhy = "cuBLAS off"
		return nil
	}
	var cands [][2]string
	if spec != "" {
		cands = blasCandidates(spec)
	} else if blasAuto {
		for _, n := range blasNames {
			cands = append(cands, [2]string{n, ""})
		}
	}
	var errs []string
	for _, c := range cands {
		l := &blasLib{path: c[0]}
		path, lt := C.CString(c[0]), C.CString(c[1])
		var msg [512]C.char
		r := C.sl_blas_open(&l.c, path, lt, &msg[0], C.int(len(msg)))
		C.free(unsafe.Pointer(path))
		C.free(unsafe.Pointer(lt))
		if r == 0 {
			l.version = int(l.c.version)
			b.blas = l
			var ws devPtr
			var wsBytes int64
			if l.c.setWorkspace != nil {
				var err error
				if ws, err = b.alloc(blasWorkspace); err != nil {
					return fmt.Errorf("cuda backend: cuBLAS workspace: %w", err)
				}
				wsBytes = blasWorkspace
			}
			var st C.int
			switch C.sl_blas_bind(&l.c, b.drv.streamPtr(), C.uint64_t(ws), C.size_t(wsBytes), &st) {
			case -1:
				return fmt.Errorf("cuda backend: cuBLAS %s: cublasSetStream_v2: status %d", c[0], int(st))
			case 0:
				l.capture = true
			}
			return nil
		}
		errs = append(errs, C.GoString(&msg[0]))
	}
	if spec != "" {
		return fmt.Errorf("cuda backend: cuBLAS %s: %s", spec, strings.Join(errs, "; "))
	}
	b.blasWhy = "no cuBLAS found"
	if len(errs) > 0 {
		b.blasWhy += " (" + errs[len(errs)-1] + ")"
	}
	return nil
}

func (b *Backend) closeBLAS() {
	if b.blas != nil {
		C.sl_blas_close(&b.blas.c)
		b.blas = nil
	}
}

// GEMMPath says which kernels multiply F16/BF16 weights by more rows than a
// GEMV takes: cuBLAS (which library, which version) or the mma tiles.
func (b *Backend) GEMMPath() string {
	if b.blas == nil {
		return fmt.Sprintf("skinny tiles for %d–%d rows, mma tiles above (%s)", b.opts.GEMVMaxRows+1, skinnyMaxRows, b.blasWhy)
	}
	v, ver := b.blas.version, "of no release"
	if v > 0 {
		ver = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	graphs := "outside CUDA graphs (no workspace of ours)"
	if b.blas.capture {
		graphs = "inside CUDA graphs"
	}
	return fmt.Sprintf("cuBLAS %s (%s) for f16/bf16 above %d rows, %s; skinny tiles (up to %d rows) and mma tiles for quantized weights",
		ver, b.blas.path, b.opts.GEMVMaxRows, graphs, skinnyMaxRows)
}

func (b *Backend) logGEMMPath() {
	slog.Info("cuda backend: GEMM path", "device", b.name, "path", b.GEMMPath())
}

// blasTypes are cuBLAS's data types of the weights it multiplies, and the
// kernel that rounds x to that type.
var blasTypes = map[kernels.DType]struct {
	typ  int
	conv string
}{
	kernels.BF16: {C.SL_CUDA_R_16BF, "to_half_bf16"},
	kernels.F16:  {C.SL_CUDA_R_16F, "to_half_f16"},
}

// blasMatMul records dst[n, out] = x[n, in] · wᵀ (+ bias) as a cuBLAS GEMM
// when cuBLAS is loaded and w is F16/BF16; false when it is not its case.
// Row-major dst, x and w are column-major dstᵀ, xᵀ and wᵀ, so cuBLAS
// computes dstᵀ (out × n, ld out) = op_T(w: in × out, ld in) · xᵀ (in × n,
// ld in) — one call, no transposed copies.
func (b *Backend) blasMatMul(d, xt, wt *tensor, bias devPtr, n, in, out int) (bool, error) {
	bt, ok := blasTypes[wt.dtype]
	if b.blas == nil || !ok || n <= b.opts.GEMVMaxRows {
		return false, nil
	}
	s := &b.step
	if !s.blas.used {
		s.blas.reset()
	}
	elems := uint64(n * in)
	if s.blas.lastGemm != len(s.launches)-1 || s.blas.lastX != uint64(xt.ptr) || s.blas.lastElems != elems ||
		s.blas.lastFn != bt.conv {
		s.blas.refs = append(s.blas.refs, [2]int{len(s.launches), 0})
		s.launches = append(s.launches, launch{fn: bt.conv, grid: elementGrid(int64(elems / 4)), block: [3]int{256, 1, 1},
			nargs: 3, args: [maxArgs]uint64{0, uint64(xt.ptr), elems}})
		s.blas.bytes = max(s.blas.bytes, int64(2*elems))
		s.blas.lastX, s.blas.lastElems, s.blas.lastFn = uint64(xt.ptr), elems, bt.conv
	}
	beta := float32(0)
	if bias != 0 {
		beta = 1
		s.launches = append(s.launches, launch{fn: "bias_rows", grid: elementGrid(int64(n * out)), block: [3]int{256, 1, 1},
			nargs: 4, args: [maxArgs]uint64{uint64(d.ptr), uint64(bias), uint64(n), uint64(out)}})
	}
	l := launch{fn: gemmFn, nargs: C.SL_G_NARGS}
	a := &l.args
	a[C.SL_G_GEMM] = uint64(uintptr(unsafe.Pointer(b.blas.c.gemm)))
	a[C.SL_G_HANDLE] = uint64(uintptr(b.blas.c.handle))
	a[C.SL_G_TRANSA], a[C.SL_G_TRANSB] = C.SL_CUBLAS_OP_T, C.SL_CUBLAS_OP_N
	a[C.SL_G_M], a[C.SL_G_N], a[C.SL_G_K] = uint64(out), uint64(n), uint64(in)
	a[C.SL_G_ALPHA], a[C.SL_G_BETA] = uint64(math.Float32bits(1)), uint64(math.Float32bits(beta))
	a[C.SL_G_A], a[C.SL_G_ATYPE], a[C.SL_G_LDA] = uint64(wt.ptr), uint64(bt.typ), uint64(in)
	a[C.SL_G_B], a[C.SL_G_BTYPE], a[C.SL_G_LDB] = 0, uint64(bt.typ), uint64(in)
	a[C.SL_G_C], a[C.SL_G_CTYPE], a[C.SL_G_LDC] = uint64(d.ptr), C.SL_CUDA_R_32F, uint64(out)
	s.blas.refs = append(s.blas.refs, [2]int{len(s.launches), C.SL_G_B})
	s.blas.lastGemm = len(s.launches)
	s.launches = append(s.launches, l)
	s.blas.used = true
	b.gemms.Add(1)
	if len(s.launches) >= maxPending {
		return true, b.Sync()
	}
	return true, nil
}

// placeBLAS runs at flush, on the CUDA goroutine: it makes b.half hold the
// step's rounded inputs and turns the offsets recorded into addresses.
func (b *Backend) placeBLAS() error {
	s := &b.step
	if !s.blas.used {
		return nil
	}
	if err := b.ensure(&b.half, s.blas.bytes); err != nil {
		return err
	}
	for _, r := range s.blas.refs {
		s.launches[r[0]].args[r[1]] += uint64(b.half.ptr)
	}
	return nil
}

// GEMMs is how many matmuls went to cuBLAS since New.
func (b *Backend) GEMMs() int64 { return b.gemms.Load() }

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
)

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func mkdirTemp() (string, error) { return os.MkdirTemp("", "sluice-cublas-") }

func newPairWith(t *testing.T, opts Options) *pair {
	t.Helper()
	g, err := New(opts)
	if err != nil {
		t.Fatalf("cuda backend: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &pair{t: t, gpu: g, cpu: cpu.New(4), rand: rand.New(rand.NewPCG(3, 4))}
}

// Matmuls of more than 8 rows of F16/BF16 weights go to cuBLAS (here the
// reference one, through the same dlopen and call as on a GPU) and equal
// the CPU's at odd sizes, with and without a bias (beta 1 and 0).
func TestBLASMatMul(t *testing.T) {
	p := newPairWith(t, Options{BLAS: testBLAS(t)})
	if path := p.gpu.GEMMPath(); !strings.HasPrefix(path, "cuBLAS") {
		t.Fatalf("GEMM path %q, want cuBLAS", path)
	}
	shapes := []struct{ n, in, out int }{{9, 96, 77}, {33, 160, 131}, {70, 64, 200}, {257, 32, 45}}
	if emulated {
		shapes = shapes[:3]
	}
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F16} {
		for i, sh := range shapes {
			w := p.upload(dt, p.randn(sh.out*sh.in, 0.05), sh.out, sh.in)
			bias := p.upload(kernels.F32, p.randn(sh.out, 1), sh.out)
			x := p.scratch(p.randn(sh.n*sh.in, 1), sh.n, sh.in)
			dst := p.scratch(p.randn(sh.n*sh.out, 100), sh.n, sh.out) // beta 0 must not read it
			var bg, bc kernels.Tensor
			if i%2 == 1 {
				bg, bc = bias.g, bias.c
			}
			before := p.gpu.GEMMs()
			must(t, p.gpu.MatMul(dst.g, x.g, w.g, bg, sh.n), p.cpu.MatMul(dst.c, x.c, w.c, bc, sh.n))
			if p.gpu.GEMMs() != before+1 {
				t.Errorf("%v n=%d: not a cuBLAS GEMM", dt, sh.n)
			}
			p.check(fmt.Sprintf("cuBLAS MatMul %v %dx%d n=%d bias=%v", dt, sh.out, sh.in, sh.n, bg != nil), dst, sh.n*sh.out,
				matmulBound(dt, sh.n))
		}
	}
	// 8 rows stay on the GEMV, quantized weights on our kernels (20 rows: skinny tiles).
	w := p.upload(kernels.Q8_0, p.randn(64*96, 0.05), 64, 96)
	x := p.scratch(p.randn(20*96, 1), 20, 96)
	dst := p.scratch(nil, 20, 64)
	before := p.gpu.GEMMs()
	must(t, p.gpu.MatMul(dst.g, x.g, w.g, nil, 20), p.cpu.MatMul(dst.c, x.c, w.c, nil, 20))
	wb := p.upload(kernels.BF16, p.randn(64*96, 0.05), 64, 96)
	must(t, p.gpu.MatMul(dst.g, x.g, wb.g, nil, 8), p.cpu.MatMul(dst.c, x.c, wb.c, nil, 8))
	if p.gpu.GEMMs() != before {
		t.Errorf("Q8_0 weights or 8 rows went to cuBLAS")
	}
	p.check("BF16 n=8 after Q8_0 n=20", dst, 8*64, matmulBound(kernels.BF16, 8))
}

// q, k and v of one input share one rounding of it: 1 conversion and 3
// GEMMs, results as the CPU's.
func TestBLASSharedInput(t *testing.T) {
	p := newPairWith(t, Options{BLAS: testBLAS(t)})
	const n, hidden, kv = 17, 128, 32
	h := p.scratch(p.randn(n*hidden, 1), n, hidden)
	var ws [3]twin
	var outs [3]twin
	for i, o := range []int{hidden, kv, kv} {
		ws[i] = p.upload(kernels.BF16, p.randn(o*hidden, 0.05), o, hidden)
		outs[i] = p.scratch(nil, n, o)
	}
	must(t, p.gpu.Sync())
	for i := range ws {
		must(t, p.gpu.MatMul(outs[i].g, h.g, ws[i].g, nil, n), p.cpu.MatMul(outs[i].c, h.c, ws[i].c, nil, n))
	}
	var fns []string
	for _, l := range p.gpu.step.launches {
		fns = append(fns, l.fn)
	}
	if want := "to_half_bf16 cublas_gemm cublas_gemm cublas_gemm"; strings.Join(fns, " ") != want {
		t.Errorf("recorded %v, want %s", fns, want)
	}
	for i := range outs {
		p.check(fmt.Sprintf("projection %d", i), outs[i], n*int(outs[i].g.Shape()[1]), matmulBound(kernels.BF16, n))
	}
}

// A cuBLAS that was asked for and cannot load fails New, saying why; "off"
// keeps our own kernels (20 rows: the skinny ones).
func TestBLASChoice(t *testing.T) {
	if _, err := New(Options{BLAS: "/nonexistent/libcublas.so.13"}); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/libcublas.so.13") {
		t.Errorf("missing cuBLAS: err %v", err)
	}
	p := newPairWith(t, Options{BLAS: "off"})
	if path := p.gpu.GEMMPath(); !strings.HasPrefix(path, "skinny tiles") {
		t.Errorf("BLAS off: GEMM path %q", path)
	}
	w := p.upload(kernels.BF16, p.randn(64*96, 0.05), 64, 96)
	x := p.scratch(p.randn(20*96, 1), 20, 96)
	dst := p.scratch(nil, 20, 64)
	must(t, p.gpu.MatMul(dst.g, x.g, w.g, nil, 20), p.cpu.MatMul(dst.c, x.c, w.c, nil, 20))
	p.check("BF16 n=20 on skinny tiles", dst, 20*64, matmulBound(kernels.BF16, 20))
	if p.gpu.GEMMs() != 0 {
		t.Errorf("BLAS off: %d cuBLAS GEMMs", p.gpu.GEMMs())
	}
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// TestGEMVShapes: every gemvx_ kernel BenchmarkGEMV may time computes what
// gemv_bf16_1 computes, a row the CPU backend's (with a folded RMSNorm too,
// which the sweep's kernels keep).
func TestGEMVShapes(t *testing.T) {
	p := newPair(t)
	const out, in = 1001, 512 // 1001: a last block with fewer rows than it takes
	w := p.upload(kernels.BF16, p.randn(out*in, 0.05), out, in)
	for _, g := range append([]gemvShape{{}}, gemvShapes...) {
		must(t, p.gpu.SetGEMVShape(g.rows, g.loads))
		x := p.scratch(p.randn(in, 1), 1, in)
		dst := p.scratch(nil, 1, out)
		must(t, p.gpu.MatMul(dst.g, x.g, w.g, nil, 1), p.cpu.MatMul(dst.c, x.c, w.c, nil, 1))
		p.check(fmt.Sprintf("MatMul BF16 %dx%d, %+v", out, in, g), dst, out, matmulBound(kernels.BF16, 1))
	}
	if err := p.gpu.SetGEMVShape(3, 8); err == nil {
		t.Error("SetGEMVShape(3, 8): no error for a kernel matmul.cu does not build")
	}
}

// BenchmarkGEMV times one-row BF16 MatMuls on a Llama-3-8B layer's matrices
// and its output head, with gemv_bf16_1 and with each gemvx_ variant (rows a
// block × loads in flight): the batch-1 decode step is these GEMVs, so the
// weight GB/s each reaches says which shape, if any, brings the step to its
// bandwidth floor. Each round runs enough copies of a matrix that the round
// reads ≥ 256 MB (the L2 holds none of it twice) and repeats as a CUDA graph,
// as decode steps do.
//
//	cuda-ops.test -test.run '^$' -test.bench BenchmarkGEMV -test.benchtime 100x
func BenchmarkGEMV(b *testing.B) {
	if emulated {
		b.Skip("timing needs a GPU")
	}
	g, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	shapes := []struct {
		name    string
		out, in int
	}{{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"head", 128256, 4096}}
	for _, sh := range shapes {
		bytes := int64(2 * sh.out * sh.in)
		copies := int(max(1, (256<<20+bytes-1)/bytes))
		ws, xs, ds := make([]kernels.Tensor, copies), make([]kernels.Tensor, copies), make([]kernels.Tensor, copies)
		for c := range copies {
			if ws[c], err = g.Upload(kernels.HostTensor{Name: "w", DType: kernels.BF16, Shape: []int{sh.out, sh.in}, Data: make([]byte, bytes)}); err != nil {
				b.Fatal(err)
			}
			if xs[c], err = g.Alloc(1, sh.in); err != nil {
				b.Fatal(err)
			}
			if ds[c], err = g.Alloc(1, sh.out); err != nil {
				b.Fatal(err)
			}
		}
		round := func(b *testing.B) {
			for c := range copies {
				if err := g.MatMul(ds[c], xs[c], ws[c], nil, 1); err != nil {
					b.Fatal(err)
				}
			}
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		for _, v := range append([]gemvShape{{}}, gemvShapes...) {
			name := "gemv_bf16_1"
			if v.rows > 0 {
				name = v.kernel()
			}
			b.Run(sh.name+"/"+name, func(b *testing.B) {
				if err := g.SetGEMVShape(v.rows, v.loads); err != nil {
					b.Fatal(err)
				}
				for range 3 { // the graph's capture, and a replay
					round(b)
				}
				start := time.Now()
				for range b.N {
					round(b)
				}
				el := time.Since(start)
				b.ReportMetric(float64(bytes)*float64(copies)*float64(b.N)/el.Seconds()/1e9, "GB/s")
				b.ReportMetric(el.Seconds()*1e6/float64(b.N*copies), "µs/matmul")
			})
		}
		if err := g.SetGEMVShape(0, 0); err != nil {
			b.Fatal(err)
		}
	}
}

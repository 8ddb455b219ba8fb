//go:build cuda || cudaemu

package cuda

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkGEMV times one-row BF16 MatMuls (gemv_bf16_1) on a Llama-3-8B
// layer's matrices and its output head: the batch-1 decode step is these
// GEMVs, so the weight GB/s each reaches, against the device's copy rate,
// says where the step loses to its bandwidth floor (BENCHMARKS.md: a fixed
// cost per kernel before the stream rate). Each round runs enough copies of a
// matrix that the round reads ≥ 256 MB (the L2 holds none of it twice) and
// repeats as a CUDA graph, as decode steps do. Commit 664ee2a had six other
// rows×loads shapes of the kernel beside it; none was 7% faster anywhere.
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
		b.Run(sh.name, func(b *testing.B) {
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
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestBLASInGraphs: with the backend's workspace set on the handle, a step
// with cuBLAS GEMMs runs plainly the first time, is captured into a CUDA
// graph the second and replayed after,
// each replay reading the step's new tables (rows gathered by GetRows) and
// still equal to the CPU. Under the emulator the reference cuBLAS's call is
// a host node of the graph; on a GPU cuBLAS records its own kernels.
func TestBLASInGraphs(t *testing.T) {
	p := newPairWith(t, Options{BLAS: testBLAS(t)})
	if path := p.gpu.GEMMPath(); !strings.Contains(path, "inside CUDA graphs") {
		t.Fatalf("GEMM path %q, want cuBLAS inside CUDA graphs", path)
	}
	const vocab, in, out, n = 50, 96, 100, 20
	emb := p.upload(kernels.F32, p.randn(vocab*in, 1), vocab, in)
	w := p.upload(kernels.BF16, p.randn(out*in, 0.05), out, in)
	x, dst := p.scratch(nil, n, in), p.scratch(nil, n, out)
	gemms := p.gpu.GEMMs()
	for step := range 4 {
		rows := make([]int32, n)
		for i := range rows {
			rows[i] = int32((7*i + 13*step) % vocab)
		}
		must(t, p.gpu.GetRows(x.g, emb.g, rows), p.cpu.GetRows(x.c, emb.c, rows))
		must(t, p.gpu.MatMul(dst.g, x.g, w.g, nil, n), p.cpu.MatMul(dst.c, x.c, w.c, nil, n))
		p.check(fmt.Sprintf("step %d", step), dst, n*out, matmulBound(kernels.BF16, n))
	}
	if got := p.gpu.GEMMs() - gemms; got != 4 {
		t.Errorf("%d GEMMs went to cuBLAS, want 4", got)
	}
	st, err := p.gpu.GraphStats()
	must(t, err)
	if st.Once != 1 || st.Captures != 1 || st.Replays != 2 {
		t.Errorf("graph stats %+v, want 1 step run once, 1 capture and 2 replays", st)
	}
}

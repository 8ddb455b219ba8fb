//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestGraphsByDefault: graphs are on unless SLUICE_CUDA_GRAPHS=0; a step
// runs plainly the first time its launches are seen (a prefill chunk of a
// new length never pays a capture), is captured the second and replayed
// after, each run equal to the CPU's.
func TestGraphsByDefault(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want GraphStats
	}{
		{"", GraphStats{Once: 3, Captures: 1, Replays: 2}},
		{"0", GraphStats{}},
	} {
		t.Run("SLUICE_CUDA_GRAPHS="+tc.env, func(t *testing.T) {
			t.Setenv("SLUICE_CUDA_GRAPHS", tc.env)
			p := newPair(t)
			const vocab, cols = 40, 256
			emb := p.upload(kernels.F32, p.randn(vocab*cols, 1), vocab, cols)
			w := p.upload(kernels.F32, p.randn(cols, 1), cols)
			bufs := map[int][2]twin{}
			// rows 2 (4 times: once, a capture, replays), then 3 and 5
			// (new launches, each once); the rows gathered differ every
			// step (a table the replay reads afresh)
			for i, n := range []int{2, 2, 2, 2, 3, 5} {
				if _, ok := bufs[n]; !ok {
					bufs[n] = [2]twin{p.scratch(nil, n, cols), p.scratch(nil, n, cols)}
				}
				x, h := bufs[n][0], bufs[n][1]
				rows := make([]int32, n)
				for r := range rows {
					rows[r] = int32((7*r + 13*i) % vocab)
				}
				must(t, p.gpu.GetRows(x.g, emb.g, rows), p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5), p.gpu.Add(h.g, x.g, n),
					p.cpu.GetRows(x.c, emb.c, rows), p.cpu.RMSNorm(h.c, x.c, w.c, n, 1e-5), p.cpu.Add(h.c, x.c, n))
				p.check(fmt.Sprintf("step %d (%d rows)", i, n), h, n*cols, 1e-6)
			}
			st, err := p.gpu.GraphStats()
			must(t, err)
			if st != tc.want {
				t.Errorf("graph stats %+v, want %+v", st, tc.want)
			}
		})
	}
}

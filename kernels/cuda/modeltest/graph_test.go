//go:build cuda || cudaemu

package modeltest

import (
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
	"github.com/sluicehq/sluice/models"
)

// TestGraphsReplay decodes the same prompts on two backends, one with CUDA
// graphs (the default), one without: the logits must be the same bits at
// every step, and decode steps after the second must replay a captured graph (the
// launches repeat; positions, slots and block tables change through the
// step tables copied before each replay).
func TestGraphsReplay(t *testing.T) {
	src := newRandomSource(testShape(), kernels.Q8_0, false)
	opts := models.Options{MaxBatchTokens: 64, MaxSeqs: 4, BlockSize: 16, KVBlocks: 32}
	plain, graphs := newCUDA(t), newCUDA(t) // graphs are on by default
	if err := plain.UseGraphs(false); err != nil {
		t.Fatal(err)
	}
	mp, err := models.Load(src, plain, opts)
	if err != nil {
		t.Fatal(err)
	}
	mg, err := models.Load(src, graphs, opts)
	if err != nil {
		t.Fatal(err)
	}
	sp, sg := []*sequence{{}, {}}, []*sequence{{}, {}}
	var np, ng int32
	toks := [][]int32{{3, 1, 4, 1, 5}, {9, 2, 6}}
	const steps = 6
	for i := range steps {
		lp, err := mp.Forward(step(sp, toks, 16, &np))
		if err != nil {
			t.Fatal(err)
		}
		lg, err := mg.Forward(step(sg, toks, 16, &ng))
		if err != nil {
			t.Fatal(err)
		}
		for j := range lp {
			if lp[j] != lg[j] {
				t.Fatalf("step %d: logit %d is %v with graphs, %v without", i, j, lg[j], lp[j])
			}
		}
		vocab := testShape().Vocab
		a, _ := argmax(lp[:vocab])
		b, _ := argmax(lp[vocab : 2*vocab])
		toks = [][]int32{{int32(a)}, {int32(b)}}
	}
	st, err := graphs.GraphStats()
	if err != nil {
		t.Fatal(err)
	}
	// prefill and the first decode step run once each (new launches), the
	// second decode step is captured, the rest replay it (the contexts stay
	// within one attention partition)
	if st.Once != 2 || st.Captures != 1 || st.Replays != steps-3 {
		t.Errorf("%d steps: %+v; want 2 run once, 1 capture, %d replays", steps, st, steps-3)
	}
	if ps, err := plain.GraphStats(); err != nil || ps != (cuda.GraphStats{}) {
		t.Errorf("graphs off: %+v (%v), want no graph work", ps, err)
	}
	t.Logf("%d steps: %d run once, %d graph captures, %d replays", steps, st.Once, st.Captures, st.Replays)
}

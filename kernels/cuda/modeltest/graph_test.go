//go:build cuda || cudaemu

package modeltest

import (
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
)

// TestGraphsReplay decodes the same prompts on two backends, one running
// every step as a CUDA graph: the logits must be the same bits at every
// step, and decode steps after the first must replay a captured graph (the
// launches repeat; positions, slots and block tables change through the
// step tables copied before each replay).
func TestGraphsReplay(t *testing.T) {
	src := newRandomSource(testShape(), kernels.Q8_0, false)
	opts := models.Options{MaxBatchTokens: 64, MaxSeqs: 4, BlockSize: 16, KVBlocks: 32}
	plain, graphs := newCUDA(t), newCUDA(t)
	if err := graphs.UseGraphs(true); err != nil {
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
	// prefill, first decode (a new shape), then replays but for the steps
	// whose attention grid changed as the contexts grew
	if st.Replays < steps/2 || st.Captures+st.Replays < steps {
		t.Errorf("%d steps ran %d captures and %d replays; want most decode steps replayed", steps, st.Captures, st.Replays)
	}
	t.Logf("%d steps: %d graph captures, %d replays", steps, st.Captures, st.Replays)
}

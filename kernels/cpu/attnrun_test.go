package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// attentionPerPosition is one (row, head) of Attention as it was before the
// run kernels: a dotHalfF32 and an axpyHalf call per position. The run
// kernels must reproduce it bit for bit.
func attentionPerPosition(o, q []float32, kc, vc []uint16, blocks []int32, pos, window, bs, kvCols, off int, scale, softcap float32) {
	hd := len(q)
	ctx := attended(pos, window)
	first := pos + 1 - ctx
	scores := make([]float32, ctx)
	maxS := float32(math.Inf(-1))
	for i := range ctx {
		p := first + i
		slot := int(blocks[p/bs])*bs + p%bs
		s := dotHalfF32(kc[slot*kvCols+off:slot*kvCols+off+hd], q) * scale
		if softcap > 0 {
			s = softcap * float32(math.Tanh(float64(s/softcap)))
		}
		scores[i] = s
		maxS = max(maxS, s)
	}
	sum := expF32(scores, scores, maxS)
	clear(o)
	inv := 1 / sum
	for i, e := range scores {
		p := first + i
		slot := int(blocks[p/bs])*bs + p%bs
		axpyHalf(o, e*inv, vc[slot*kvCols+off:slot*kvCols+off+hd])
	}
}

// TestAttentionRunsBitExact: Attention, reading K and V a block run at a
// time, gives the per-position loop's output bit for bit for head sizes the
// run kernels take (multiples of 8 from 8 to 256) and ones they pass to the
// per-position calls (12), block sizes from 1 to 32 in a shuffled block
// table, contexts that start and end inside blocks, sliding windows and
// soft caps, several rows of a sequence, query heads sharing a KV head (3
// or 8 to a group) or not, on 2 to 16 threads.
func TestAttentionRunsBitExact(t *testing.T) {
	for _, c := range []struct{ heads, kvHeads, threads int }{{6, 2, 2}, {8, 1, 2}, {8, 1, 8}, {8, 1, 16}, {4, 4, 2}} {
		t.Run(fmt.Sprintf("heads=%d/kv=%d/threads=%d", c.heads, c.kvHeads, c.threads), func(t *testing.T) {
			testAttentionRuns(t, c.heads, c.kvHeads, c.threads)
		})
	}
}

func testAttentionRuns(t *testing.T, heads, kvHeads, threads int) {
	const layers = 2
	r := rand.New(rand.NewPCG(26, uint64(heads*100+threads)))
	// 64 has its own path in attnScoresRunAVX2; runs of 8 positions and
	// the rest take different paths too (bs 1 and 5 against 16 and 32).
	for _, hd := range []int{64, 80, 96, 128, 256, 72, 8, 24, 12} {
		for _, bs := range []int{1, 5, 16, 32} {
			for _, c := range []struct {
				window int
				cap    float32
			}{{0, 0}, {7, 0}, {0, 30}, {40, 20}, {1, 0}} {
				name := fmt.Sprintf("hd=%d/bs=%d/window=%d/cap=%g", hd, bs, c.window, c.cap)
				// Two sequences: rows 0-4 of one at positions 66-70, one
				// row of another at position 3 (a run inside one block).
				ctxs := []int{71, 4}
				blocksOf := func(n int) int { return (n + bs - 1) / bs }
				nBlocks := blocksOf(ctxs[0]) + blocksOf(ctxs[1]) + 3
				b := New(threads)
				kv, err := b.NewKVStore(kernels.KVConfig{Layers: layers, Blocks: nBlocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd})
				if err != nil {
					t.Fatal(err)
				}
				st := kv.(*kvStore)
				toHalfGeneric(st.k[1], randF32(r, len(st.k[1])))
				toHalfGeneric(st.v[1], randF32(r, len(st.v[1])))
				perm := r.Perm(nBlocks)
				tables := [][]int32{make([]int32, blocksOf(ctxs[0])), make([]int32, blocksOf(ctxs[1]))}
				for i := range tables[0] {
					tables[0][i] = int32(perm[i])
				}
				for i := range tables[1] {
					tables[1][i] = int32(perm[len(tables[0])+i])
				}
				batch := &kernels.Batch{Seqs: []kernels.SeqRows{
					{Start: 0, End: 5, ContextLen: ctxs[0], Blocks: tables[0]},
					{Start: 5, End: 6, ContextLen: ctxs[1], Blocks: tables[1]},
				}}
				rowSeq := []int{0, 0, 0, 0, 0, 1}
				for p := 66; p <= 70; p++ {
					batch.Positions = append(batch.Positions, int32(p))
				}
				batch.Positions = append(batch.Positions, 3)
				n := len(batch.Positions)
				batch.Tokens = make([]int32, n)
				q := scratch(t, b, randF32(r, n*heads*hd), n, heads*hd)
				out := scratch(t, b, nil, n, heads*hd)
				const scale = 0.37
				if err := b.attention(out, q, nil, nil, kv, 1, batch, scale, c.window, c.cap); err != nil {
					t.Fatal(err)
				}
				b.Close()
				got, qs := out.(*tensor).f32, q.(*tensor).f32
				want := make([]float32, hd)
				for row := range n {
					for h := range heads {
						at := row*heads*hd + h*hd
						attentionPerPosition(want, qs[at:at+hd], st.k[1], st.v[1], tables[rowSeq[row]], int(batch.Positions[row]),
							c.window, bs, kvHeads*hd, (h/(heads/kvHeads))*hd, scale, c.cap)
						for j, w := range want {
							if g := got[at+j]; math.Float32bits(g) != math.Float32bits(w) {
								t.Fatalf("%s: row %d head %d [%d]: %v, per-position loop %v", name, row, h, j, g, w)
							}
						}
					}
				}
			}
		}
	}
}

// TestMaxF32: maxF32's four chains give one chain's max, ±0 and ±Inf
// included (+0 over −0 in either order), and NaN where any value is NaN.
func TestMaxF32(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), -1, 1}
	for n := range 14 {
		for range 200 {
			x := make([]float32, n)
			for i := range x {
				x[i] = special[r.IntN(len(special))]
			}
			nan := n > 0 && r.IntN(4) == 0
			if nan {
				x[r.IntN(n)] = float32(math.NaN())
			}
			want := float32(math.Inf(-1))
			for _, v := range x {
				want = max(want, v)
			}
			got := maxF32(x)
			if nan && !math.IsNaN(float64(got)) || !nan && math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("maxF32(%v) = %v, one chain %v", x, got, want)
			}
		}
	}
}

package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQueryAttention: after SlidingAttention has written a prompt's K/V,
// QueryAttention with the same queries gives the same output bit for bit,
// window or not, in rows of several sequences placed anywhere in the batch,
// and leaves every byte of the store as it was (a Gemma 4 assistant reads
// its target's cache and must never change it); a row with no slot needs
// none.
func TestQueryAttention(t *testing.T) {
	const (
		heads, kvHeads, hd = 4, 2, 16
		bs, blocks, n      = 4, 16, 23
	)
	r := rand.New(rand.NewPCG(3, 4))
	table := make([]int32, blocks)
	for i, p := range r.Perm(blocks) {
		table[i] = int32(p)
	}
	for _, window := range []int{0, 1, 5, 100} {
		b := New(2)
		kv, err := b.NewKVStore(kernels.KVConfig{Layers: 2, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd})
		if err != nil {
			t.Fatal(err)
		}
		qv := randF32(r, n*heads*hd)
		q := scratch(t, b, qv, n, heads*hd)
		k, v := scratch(t, b, randF32(r, n*kvHeads*hd), n, kvHeads*hd), scratch(t, b, randF32(r, n*kvHeads*hd), n, kvHeads*hd)
		want := scratch(t, b, nil, n, heads*hd)
		batch := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: n, ContextLen: n, Blocks: table}}}
		for p := range n {
			batch.Tokens = append(batch.Tokens, 0)
			batch.Positions = append(batch.Positions, int32(p))
			batch.Slots = append(batch.Slots, table[p/bs]*bs+int32(p%bs))
		}
		if err := b.SlidingAttention(want, q, k, v, kv, 1, batch, 0.3, window); err != nil {
			t.Fatal(err)
		}
		store := kv.(*kvStore)
		before := [][]uint16{slices.Clone(store.k[1]), slices.Clone(store.v[1])}
		// Rows 3, 22 and 10 as one-row sequences, in that order, no slots.
		picks := []int{3, 22, 10}
		qq := scratch(t, b, nil, len(picks), heads*hd)
		qb := &kernels.Batch{}
		for i, p := range picks {
			copy(qq.(*tensor).f32[i*heads*hd:(i+1)*heads*hd], qv[p*heads*hd:(p+1)*heads*hd])
			qb.Tokens = append(qb.Tokens, 0)
			qb.Positions = append(qb.Positions, int32(p))
			qb.Seqs = append(qb.Seqs, kernels.SeqRows{Start: i, End: i + 1, ContextLen: p + 1, Blocks: table})
		}
		got := scratch(t, b, nil, len(picks), heads*hd)
		if err := b.QueryAttention(got, qq, kv, 1, qb, 0.3, window); err != nil {
			t.Fatal(err)
		}
		for i, p := range picks {
			g, w := got.(*tensor).f32[i*heads*hd:(i+1)*heads*hd], want.(*tensor).f32[p*heads*hd:(p+1)*heads*hd]
			if !slices.Equal(g, w) {
				t.Fatalf("window %d: position %d: %v, SlidingAttention %v", window, p, g, w)
			}
		}
		if !slices.Equal(store.k[1], before[0]) || !slices.Equal(store.v[1], before[1]) {
			t.Fatalf("window %d: QueryAttention changed the store", window)
		}
		b.Close()
	}
}

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkAttentionDecode: one decode row of SmolLM2-135M's attention (9
// query heads over 3 KV heads of 64) at a few context lengths, on 1 and 2
// threads: where handing heads to a helper starts to pay (attentionGrain).
func BenchmarkAttentionDecode(b *testing.B) {
	const heads, kvHeads, hd, bs = 9, 3, 64, 16
	r := rand.New(rand.NewPCG(8, 8))
	for _, ctx := range []int{16, 64, 256, 1024} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("ctx=%d/t=%d", ctx, threads), func(b *testing.B) {
				be := New(threads)
				defer be.Close()
				blocks := (ctx + bs - 1) / bs
				kv, err := be.NewKVStore(kernels.KVConfig{Layers: 1, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd})
				if err != nil {
					b.Fatal(err)
				}
				st := kv.(*kvStore)
				for i := range st.k[0] {
					st.k[0][i], st.v[0][i] = uint16(0x3000+r.IntN(0x800)), uint16(0x3000+r.IntN(0x800))
				}
				table := make([]int32, blocks)
				for i := range table {
					table[i] = int32(i)
				}
				batch := &kernels.Batch{Tokens: []int32{0}, Positions: []int32{int32(ctx - 1)}, Slots: []int32{int32(ctx - 1)},
					Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: ctx, Blocks: table}}}
				q := &tensor{shape: []int{1, heads * hd}, dtype: kernels.F32, f32: randVec(r, heads*hd)}
				k := &tensor{shape: []int{1, kvHeads * hd}, dtype: kernels.F32, f32: randVec(r, kvHeads*hd)}
				v := &tensor{shape: []int{1, kvHeads * hd}, dtype: kernels.F32, f32: randVec(r, kvHeads*hd)}
				out := &tensor{shape: []int{1, heads * hd}, dtype: kernels.F32, f32: make([]float32, heads*hd)}
				for b.Loop() {
					if err := be.Attention(out, q, k, v, kv, 0, batch, 0.125); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

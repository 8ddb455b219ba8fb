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
// cpu-ns/op is the process's CPU time per call, steadier than wall time on
// a shared machine (at t=2 it counts the helper's spinning too).
func BenchmarkAttentionDecode(b *testing.B) {
	benchAttention(b, 1, []int{16, 64, 256, 1024})
}

// BenchmarkAttentionVerify: a speculative verify step's attention, 8 rows
// of one sequence at consecutive positions ending at ctx−1.
func BenchmarkAttentionVerify(b *testing.B) {
	benchAttention(b, 8, []int{128, 1024})
}

func benchAttention(b *testing.B, rows int, ctxs []int) {
	const heads, kvHeads, hd, bs = 9, 3, 64, 16
	r := rand.New(rand.NewPCG(8, 8))
	for _, ctx := range ctxs {
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
				batch := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: rows, ContextLen: ctx, Blocks: table}}}
				for p := ctx - rows; p < ctx; p++ {
					batch.Tokens = append(batch.Tokens, 0)
					batch.Positions = append(batch.Positions, int32(p))
					batch.Slots = append(batch.Slots, int32(p))
				}
				q := &tensor{shape: []int{rows, heads * hd}, dtype: kernels.F32, f32: randVec(r, rows*heads*hd)}
				k := &tensor{shape: []int{rows, kvHeads * hd}, dtype: kernels.F32, f32: randVec(r, rows*kvHeads*hd)}
				v := &tensor{shape: []int{rows, kvHeads * hd}, dtype: kernels.F32, f32: randVec(r, rows*kvHeads*hd)}
				out := &tensor{shape: []int{rows, heads * hd}, dtype: kernels.F32, f32: make([]float32, rows*heads*hd)}
				cpu0 := processCPU()
				for b.Loop() {
					if err := be.Attention(out, q, k, v, kv, 0, batch, 0.125); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((processCPU()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

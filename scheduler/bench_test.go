package scheduler

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
)

// BenchmarkDecodeStep measures one scheduler step (Schedule + Advance) with
// n sequences decoding, the steady state of a busy server. Sequences restart
// at 1024 tokens so the pool never runs out; the prefix cache is on.
func BenchmarkDecodeStep(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("seqs=%d", n), func(b *testing.B) {
			const maxLen = 1024
			pool, _ := kvcache.NewPool(kvcache.Config{Blocks: n * maxLen / 16 * 2, PrefixCaching: true})
			s, _ := New(Config{MaxBatchTokens: 4096, MaxSeqs: n}, pool)
			seqs := make([]*Seq, n)
			for i := range seqs {
				seqs[i] = &Seq{Tokens: make([]int32, 32, maxLen+1)}
				seqs[i].Tokens[0] = int32(i)
				s.Add(seqs[i])
			}
			b.ReportAllocs()
			for b.Loop() {
				p := s.Schedule()
				s.Advance(p)
				for _, it := range p.Items {
					q := it.Seq
					q.Tokens = append(q.Tokens, int32(len(q.Tokens)))
					if len(q.Tokens) == maxLen {
						s.Finish(q)
						*q = Seq{Tokens: q.Tokens[:32]}
						s.Add(q)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/seq")
		})
	}
}

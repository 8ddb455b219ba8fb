package kvcache

import (
	"fmt"
	"testing"
)

// BenchmarkAllocateFree grows a table to n tokens one block at a time, the
// way decoding does, then frees it: ns/op covers n/BlockSize allocations and
// one free.
func BenchmarkAllocateFree(b *testing.B) {
	for _, n := range []int{16, 512, 4096} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			p := mustPool(b, 1024, DefaultBlockSize, false)
			var t Table
			b.ReportAllocs()
			for b.Loop() {
				for k := DefaultBlockSize; k <= n; k += DefaultBlockSize {
					p.Allocate(&t, nil, k, 0)
				}
				p.Free(&t)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n/DefaultBlockSize)), "ns/block")
		})
	}
}

// BenchmarkPrefixHit admits a sequence whose n-token prompt is fully cached:
// Lookup (hash chain), Allocate sharing the blocks, Commit, Free. Salted,
// it derives the salt's seed per admission too, as the engine does.
func BenchmarkPrefixHit(b *testing.B) {
	for _, salt := range []string{"", "key-0123456789abcdef"} {
		for _, n := range []int{512, 4096} {
			b.Run(fmt.Sprintf("salted=%v/tokens=%d", salt != "", n), func(b *testing.B) {
				p := mustPool(b, 1024, DefaultBlockSize, true)
				toks := seqTokens(n+1, 1)
				var t Table
				var pre Prefix
				t.SetSalt(SaltOf(salt))
				p.Allocate(&t, nil, n+1, 0)
				p.Commit(&t, toks, n+1)
				p.Free(&t)
				b.ReportAllocs()
				for b.Loop() {
					seed := SaltOf(salt)
					t.SetSalt(seed)
					if p.LookupSalted(&pre, seed, toks, n) != n {
						b.Fatal("no hit")
					}
					p.Allocate(&t, &pre, n+1, 0)
					p.Commit(&t, toks, n+1)
					p.Free(&t)
				}
			})
		}
	}
}

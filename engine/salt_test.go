package engine

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
)

// CacheSalt partitions the prefix cache: the same 500-token prompt sent
// under another salt computes everything again and reports no cached
// tokens (so CachedTokens tells nothing about what another key sent), while
// the same salt hits as the unsalted cache does. Outputs are unchanged.
func TestCacheSaltPartitionsPrefixCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 2048, 256, 16)
		e := newTestEngine(t, m, Config{MaxBatchTokens: 1024})
		p := prompt(500, 9, 64)
		const shared = 500 / 16 * 16 // whole blocks, the last token left to compute
		for _, tc := range []struct {
			name, salt string
			want       int
		}{
			{"first under salt a", "key-a", 0},
			{"salt b, same prompt", "key-b", 0},
			{"unsalted, same prompt", "", 0},
			{"salt a again", "key-a", shared},
			{"salt b again", "key-b", shared},
			{"unsalted again", "", shared},
		} {
			before := e.Stats()
			out, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 4, CacheSalt: tc.salt}), 0)
			synctest.Wait()
			after := e.Stats()
			if r.CachedTokens != tc.want {
				t.Errorf("%s: cached tokens %d, want %d", tc.name, r.CachedTokens, tc.want)
			}
			if got := after.PrefixHitTokens - before.PrefixHitTokens; got != int64(tc.want) {
				t.Errorf("%s: prefix hit tokens %d, want %d", tc.name, got, tc.want)
			}
			if !slices.Equal(out, m.reference(p, 4)) {
				t.Errorf("%s: output changed", tc.name)
			}
		}
	})
}

// The choices of a group fork one prefill, so they must share a partition.
func TestSubmitGroupOneSaltOneTenant(t *testing.T) {
	e := newTestEngine(t, newHashModel(64, 100, 8, 16), Config{})
	p := prompt(10, 1, 64)
	for _, reqs := range [][]Request{
		{{Prompt: p, CacheSalt: "a"}, {Prompt: p, CacheSalt: "b"}},
		{{Prompt: p, Tenant: "a"}, {Prompt: p, Tenant: "b"}},
	} {
		if _, err := e.SubmitGroup(bg, reqs); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v, want ErrInvalidRequest", reqs, err)
		}
	}
}

//go:build cuda || cudaemu

package cuda

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

// refLogprobs is engine/logprobs.go's computation written plainly: logZ in
// float64 over float32 differences from the max, a stable sort of every
// token by (logit desc, id asc) for the top k.
func refLogprobs(row []float32, tok int32, k int) RowLogprobs {
	m := float32(math.Inf(-1))
	for _, l := range row {
		m = max(m, l)
	}
	var sum float64
	for _, l := range row {
		sum += math.Exp(float64(l - m))
	}
	logZ := float64(m) + math.Log(sum)
	out := RowLogprobs{Logprob: float32(float64(row[tok]) - logZ)}
	ids := make([]int32, len(row))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		if row[a] != row[b] {
			return cmp.Compare(row[b], row[a])
		}
		return cmp.Compare(a, b)
	})
	for _, id := range ids[:min(k, len(ids))] {
		out.Top = append(out.Top, TopLogprob{ID: id, Logprob: float32(float64(row[id]) - logZ)})
	}
	return out
}

// TestLogprobs: the device's logprobs equal the host computation's at odd
// vocabulary sizes (fewer tokens than k among them), with ties (the lower
// id first, at the k-th place too), −0 beside +0 and −inf (a constraint's
// mask), for rows asked in any order, twice, or not at all.
func TestLogprobs(t *testing.T) {
	p := newPair(t)
	for _, vocab := range []int{1, 7, 21, 1023, 1025, 3001, 50257} {
		if emulated && vocab > 3001 {
			continue
		}
		const n = 5
		logits := p.randn(n*vocab, 3)
		for range n * vocab / 7 { // ties
			logits[p.rand.IntN(n*vocab)] = logits[p.rand.IntN(n*vocab)]
		}
		if vocab >= 21 {
			row := logits[vocab : 2*vocab] // row 1: a tie across the 20th place and masked tokens
			best := slices.Max(row)
			for i := range 25 {
				row[(i*7)%vocab] = best
			}
			for i := 3; i < vocab; i += 5 {
				row[i] = float32(math.Inf(-1))
			}
			row2 := logits[2*vocab : 3*vocab] // row 2: ±0 at the top, the rest below
			for i := range row2 {
				row2[i] = -1 - float32(i%11)
			}
			row2[vocab-1], row2[4] = float32(math.Copysign(0, -1)), 0
		}
		lt := p.scratch(logits, n, vocab)
		var reqs []LogprobRow
		for r := n - 1; r >= 0; r-- {
			if r == 3 {
				continue // not asked
			}
			for _, k := range []int{0, 1, 5, 20} {
				reqs = append(reqs, LogprobRow{Row: r, Token: int32(p.rand.IntN(vocab)), K: k})
			}
		}
		got := make([]RowLogprobs, len(reqs))
		must(t, p.gpu.Logprobs(lt.g, reqs, got))
		for i, q := range reqs {
			want := refLogprobs(logits[q.Row*vocab:(q.Row+1)*vocab], q.Token, q.K)
			if !closeLogprob(got[i].Logprob, want.Logprob) || len(got[i].Top) != len(want.Top) {
				t.Fatalf("vocab %d request %+v: %v (%d top), want %v (%d)", vocab, q, got[i].Logprob, len(got[i].Top), want.Logprob, len(want.Top))
			}
			for j, w := range want.Top {
				if g := got[i].Top[j]; g.ID != w.ID || !closeLogprob(g.Logprob, w.Logprob) {
					t.Fatalf("vocab %d request %+v: top %d is %+v, want %+v", vocab, q, j, g, w)
				}
			}
		}
	}
}

// closeLogprob: logZ's sum associates differently on the device (a tree)
// than on the host (a loop); the float32 results agree to an ulp or two.
func closeLogprob(a, b float32) bool {
	if math.IsInf(float64(a), -1) || math.IsInf(float64(b), -1) {
		return a == b
	}
	return math.Abs(float64(a-b)) <= 2e-6*max(1, math.Abs(float64(b)))
}

func TestLogprobsRefused(t *testing.T) {
	p := newPair(t)
	lt := p.scratch(p.randn(2*9, 1), 2, 9)
	for _, q := range []LogprobRow{{Row: 2}, {Row: -1}, {Token: 9}, {Token: -1}, {K: 21}, {K: -1}} {
		if err := p.gpu.Logprobs(lt.g, []LogprobRow{q}, make([]RowLogprobs, 1)); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
	if err := p.gpu.Logprobs(lt.g, []LogprobRow{{}}, nil); err == nil {
		t.Error("no room for the answer accepted")
	}
}

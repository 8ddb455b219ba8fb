//go:build cuda || cudaemu

package cuda

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

// refChain is the engine's sampling chain (engine/sample.go, llama.cpp's
// order) written plainly: penalties, then greedy or top-k → top-p → min-p →
// softmax → the draw u, candidates in the order the engine walks them.
func refChain(logits []float32, p SampleParams) int32 {
	l := slices.Clone(logits)
	if penalize(&p) {
		counts := map[int32]int32{}
		for _, t := range p.Penalized {
			counts[t]++
		}
		rep := p.RepetitionPenalty
		if rep == 0 {
			rep = 1
		}
		for t, n := range counts {
			if l[t] <= 0 {
				l[t] *= rep
			} else {
				l[t] /= rep
			}
			l[t] -= float32(n)*p.FrequencyPenalty + p.PresencePenalty
		}
	}
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	if p.Temperature <= 0 {
		return int32(best)
	}
	type cand struct {
		id int32
		l  float32
		p  float64
	}
	cands := make([]cand, len(l))
	for i, v := range l {
		cands[i] = cand{id: int32(i), l: v}
	}
	byLogit := func(a, b cand) int {
		if c := cmp.Compare(b.l, a.l); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	}
	if k := int(p.TopK); k > 0 && k < len(cands) {
		slices.SortStableFunc(cands, byLogit)
		cands = cands[:k]
	} else {
		cands[0], cands[best] = cands[best], cands[0]
	}
	softmax := func(temp float32) {
		sum := 0.0
		for i := range cands {
			cands[i].p = math.Exp((float64(cands[i].l) - float64(cands[0].l)) / float64(temp))
			sum += cands[i].p
		}
		for i := range cands {
			cands[i].p /= sum
		}
	}
	if p.TopP > 0 && p.TopP < 1 {
		softmax(1)
		cum := 0.0
		for i := range cands {
			if cum += cands[i].p; cum >= float64(p.TopP) {
				cands = cands[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		min, n := float64(cands[0].l)+math.Log(float64(p.MinP)), 1
		for _, c := range cands[1:] {
			if float64(c.l) >= min {
				cands[n] = c
				n++
			}
		}
		cands = cands[:n]
	}
	softmax(p.Temperature)
	cum := 0.0
	for _, c := range cands {
		if cum += c.p; p.U < cum {
			return c.id
		}
	}
	return cands[len(cands)-1].id
}

// TestSample: the device sampler picks the engine chain's token for the same
// draw in every row it decides, leaves Undecided exactly where it says it
// will (top-p without top-k), and does not touch the logits.
func TestSample(t *testing.T) {
	p := newPair(t)
	rows, vocab := 48, 128256
	if emulated {
		rows, vocab = 24, 3000
	}
	logits := p.randn(rows*vocab, 3)
	for range rows * vocab / 50 { // ties, at the top-k boundary too
		logits[p.rand.IntN(rows*vocab)] = logits[p.rand.IntN(rows*vocab)]
	}
	lt := p.scratch(logits, rows, vocab)
	params := make([]SampleParams, rows)
	for i := range params {
		sp := SampleParams{Temperature: []float32{0, 0.7, 1, 1.3}[i%4], TopK: []int32{0, 40, 1, 300}[i/4%4], U: p.rand.Float64()}
		switch i / 16 % 3 {
		case 1:
			sp.TopP, sp.MinP = 0.9, 0.05
		case 2:
			sp.RepetitionPenalty, sp.PresencePenalty, sp.FrequencyPenalty = 1.3, 0.5, 0.25
			for range 40 {
				sp.Penalized = append(sp.Penalized, int32(p.rand.IntN(vocab)))
			}
			sp.Penalized = append(sp.Penalized, sp.Penalized[:10]...) // repeats: counts > 1
		}
		if i%8 == 7 {
			sp.MinP = 0.2
		}
		params[i] = sp
	}
	got := make([]int32, rows)
	must(t, p.gpu.Sample(lt.g, params, got))
	for r, sp := range params {
		row := logits[r*vocab : (r+1)*vocab]
		undecided := sp.Temperature > 0 && (sp.TopK <= 0 || int(sp.TopK) >= vocab) && sp.TopP > 0 && sp.TopP < 1
		switch {
		case undecided && got[r] != Undecided:
			t.Errorf("row %d (%+v): token %d, want Undecided (top-p without top-k)", r, sp, got[r])
		case !undecided && got[r] != refChain(row, sp):
			t.Errorf("row %d (%+v): token %d, the engine's chain picks %d", r, sp, got[r], refChain(row, sp))
		}
	}
	after := make([]float32, rows*vocab)
	must(t, p.gpu.Read(lt.g, after))
	if !slices.Equal(after, logits) {
		t.Error("Sample changed the logits")
	}
}

package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func seed(v uint64) *uint64 { return &v }

// logits ln(1), ln(2), ln(3), ln(4): softmax gives exactly .1 .2 .3 .4.
var ln1234 = []float32{0, float32(math.Log(2)), float32(math.Log(3)), float32(math.Log(4))}

func dist(s *sampler, logits []float32, history []int32) map[int32]float64 {
	out := map[int32]float64{}
	for _, c := range s.filter(s.candidates(logits, history)) {
		out[c.id] = c.p
	}
	return out
}

func TestFilterDistributions(t *testing.T) {
	sq := func(x float64) float64 { return math.Sqrt(x) }
	for _, tc := range []struct {
		name string
		p    SamplingParams
		want map[int32]float64
	}{
		{"plain", SamplingParams{Temperature: 1}, map[int32]float64{0: .1, 1: .2, 2: .3, 3: .4}},
		{"top-k 2", SamplingParams{Temperature: 1, TopK: 2}, map[int32]float64{3: 4. / 7, 2: 3. / 7}},
		{"top-k above vocab", SamplingParams{Temperature: 1, TopK: 9}, map[int32]float64{0: .1, 1: .2, 2: .3, 3: .4}},
		{"top-p .5", SamplingParams{Temperature: 1, TopP: .5}, map[int32]float64{3: 4. / 7, 2: 3. / 7}},
		{"top-p .3 keeps the first", SamplingParams{Temperature: 1, TopP: .3}, map[int32]float64{3: 1}},
		{"min-p .6", SamplingParams{Temperature: 1, MinP: .6}, map[int32]float64{3: 4. / 7, 2: 3. / 7}},
		{"min-p .8", SamplingParams{Temperature: 1, MinP: .8}, map[int32]float64{3: 1}},
		{"temp .5", SamplingParams{Temperature: .5}, map[int32]float64{0: 1. / 30, 1: 4. / 30, 2: 9. / 30, 3: 16. / 30}},
		{"temp 2", SamplingParams{Temperature: 2}, map[int32]float64{
			0: 1 / (1 + sq(2) + sq(3) + 2), 1: sq(2) / (1 + sq(2) + sq(3) + 2), 2: sq(3) / (1 + sq(2) + sq(3) + 2), 3: 2 / (1 + sq(2) + sq(3) + 2)}},
		// Temperature comes after the truncations, as in llama.cpp.
		{"top-k 3 then temp 2", SamplingParams{Temperature: 2, TopK: 3}, map[int32]float64{
			1: sq(2) / (sq(2) + sq(3) + 2), 2: sq(3) / (sq(2) + sq(3) + 2), 3: 2 / (sq(2) + sq(3) + 2)}},
		{"top-p .65 at temp 1, then temp 2", SamplingParams{Temperature: 2, TopP: .65}, map[int32]float64{
			2: sq(3) / (sq(3) + 2), 3: 2 / (sq(3) + 2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dist(newSampler(tc.p), ln1234, nil)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for id, p := range tc.want {
				if math.Abs(got[id]-p) > 1e-6 {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// Hand-computed: history [0 2 2], repetition 2, frequency .5, presence .25.
//
//	token 0: logit 1 > 0 → 1/2 = .5, count 1 → .5 - (1·.5 + .25) = -.25
//	token 1: not in history → 2
//	token 2: logit -1 ≤ 0 → -1·2 = -2, count 2 → -2 - (2·.5 + .25) = -3.25
func TestPenalties(t *testing.T) {
	logits := []float32{1, 2, -1}
	history := []int32{1, 1, 1, 0, 2, 2} // a window of 3 drops the leading 1s
	s := newSampler(SamplingParams{Temperature: 1, RepetitionPenalty: 2, FrequencyPenalty: .5, PresencePenalty: .25, PenaltyLastN: 3})
	var got []float32
	for _, c := range s.candidates(logits, history) {
		got = append(got, c.logit)
	}
	if want := []float32{-.25, 2, -3.25}; !slices.Equal(got, want) {
		t.Fatalf("penalized logits %v, want %v", got, want)
	}
	if !slices.Equal(logits, []float32{1, 2, -1}) {
		t.Fatal("sampler modified the model's logits")
	}
	// Greedy sees penalties too: without them token 1 wins; a strong presence penalty flips it.
	g := newSampler(SamplingParams{PresencePenalty: 5})
	if got := g.sample(logits, []int32{1}); got != 0 {
		t.Fatalf("greedy with presence penalty picked %d, want 0", got)
	}
	if got := newSampler(SamplingParams{}).sample(logits, []int32{1}); got != 1 {
		t.Fatalf("greedy picked %d, want 1", got)
	}
}

func TestGreedyTiesPickLowestID(t *testing.T) {
	if got := argmax([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("argmax = %d, want 1", got)
	}
}

// Draws follow the distribution: 40000 draws from .1 .2 .3 .4 land within
// 4 standard deviations (≈ .01) of each probability for this fixed seed.
func TestDrawFrequencies(t *testing.T) {
	s := newSampler(SamplingParams{Temperature: 1, Seed: seed(42)})
	const n = 40000
	counts := make([]int, 4)
	for range n {
		counts[s.sample(ln1234, nil)]++
	}
	for id, c := range counts {
		if want := float64(id+1) / 10; math.Abs(float64(c)/n-want) > .01 {
			t.Fatalf("token %d drawn %.4f of the time, want %.1f (counts %v)", id, float64(c)/n, want, counts)
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	run := func(sd *uint64) []int32 {
		s := newSampler(SamplingParams{Temperature: 1.3, TopK: 3, TopP: .95, Seed: sd})
		r := rand.New(rand.NewPCG(1, 1)) // same logits each run
		var out []int32
		for range 64 {
			logits := make([]float32, 50)
			for i := range logits {
				logits[i] = float32(r.NormFloat64())
			}
			out = append(out, s.sample(logits, out))
		}
		return out
	}
	a, b, c := run(seed(7)), run(seed(7)), run(seed(8))
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different draws")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave the same 64 draws")
	}
}

func TestPartialSortsMatchFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, k := range []int{1, 2, 5, 40, 99} {
		cands := make([]cand, 100)
		for i := range cands {
			cands[i] = cand{id: int32(i), logit: float32(r.IntN(20))} // many ties
		}
		want := slices.Clone(cands)
		slices.SortFunc(want, byLogit)
		if got := topK(cands, k); !slices.Equal(got, want[:k]) {
			t.Fatalf("k=%d: %v, want %v", k, got, want[:k])
		}
	}
	// top-p's partial sort cuts where a full sort does.
	for _, p := range []float64{.1, .5, .9, .999} {
		cands := make([]cand, 1000)
		for i := range cands {
			cands[i] = cand{id: int32(i), logit: float32(r.NormFloat64() * 2)}
		}
		maxToFront(cands)
		softmax(cands, 1)
		full := slices.Clone(cands)
		slices.SortFunc(full, byLogit)
		want := full
		cum, n := 0.0, 0
		for n < len(want) {
			cum += want[n].p
			n++
			if cum >= p {
				break
			}
		}
		if got := topP(cands, p, false); !slices.Equal(got, want[:n]) {
			t.Fatalf("top-p %v: kept %d, want %d", p, len(got), n)
		}
	}
}

func TestValidateSampling(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		p  SamplingParams
		ok bool
	}{
		{SamplingParams{}, true},
		{SamplingParams{Temperature: .7, TopK: 40, TopP: .9, MinP: .05, RepetitionPenalty: 1.1, PenaltyLastN: -1}, true},
		{SamplingParams{Temperature: -1}, false},
		{SamplingParams{Temperature: nan}, false},
		{SamplingParams{TopK: -1}, false},
		{SamplingParams{TopP: 1.5}, false},
		{SamplingParams{MinP: -.1}, false},
		{SamplingParams{RepetitionPenalty: -1}, false},
		{SamplingParams{PresencePenalty: float32(math.Inf(1))}, false},
		{SamplingParams{PenaltyLastN: -2}, false},
	} {
		err := validateSampling(tc.p)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidRequest)) {
			t.Errorf("%+v: %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	logits := make([]float32, 49152)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	history := make([]int32, 256)
	for i := range history {
		history[i] = int32(r.IntN(len(logits)))
	}
	for _, tc := range []struct {
		name string
		p    SamplingParams
	}{
		{"greedy", SamplingParams{}},
		{"temp", SamplingParams{Temperature: .8}},
		{"topk40-topp-minp-penalties", SamplingParams{Temperature: .8, TopK: 40, TopP: .95, MinP: .05, RepetitionPenalty: 1.1}},
		{"topp-full-sort", SamplingParams{Temperature: .8, TopP: .95}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := newSampler(tc.p)
			b.ReportAllocs()
			for b.Loop() {
				s.sample(logits, history)
			}
		})
	}
}

//go:build cudaemu

package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
)

// TestDeviceLogprobsMatchHost runs the CUDA backend's device logprobs (on
// the emulator) beside this package's host computation (logprobOf, what a
// sequence asking for logprobs gets): the same top tokens in the same
// order, ties to the lower id, and logprobs within the float64 sum's
// reassociation, at odd vocabulary sizes with ties and masked tokens.
func TestDeviceLogprobsMatchHost(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	r := rand.New(rand.NewPCG(21, 22))
	for _, vocab := range []int{3, 19, 1001, 2049} {
		const rows = 3
		logits := make([]float32, rows*vocab)
		for i := range logits {
			logits[i] = float32(r.NormFloat64()) * 2
		}
		for range len(logits) / 4 { // ties
			logits[r.IntN(len(logits))] = logits[r.IntN(len(logits))]
		}
		for i := 1; i < vocab; i += 3 { // row 0 as a constraint's mask leaves it
			logits[i] = float32(math.Inf(-1))
		}
		lt, err := be.Upload(kernels.HostTensor{Name: "logits", DType: kernels.F32, Shape: []int{rows, vocab},
			Data: unsafe.Slice((*byte)(unsafe.Pointer(&logits[0])), 4*len(logits))})
		if err != nil {
			t.Fatal(err)
		}
		var reqs []cuda.LogprobRow
		for row := range rows {
			for _, k := range []int{0, 3, MaxTopLogprobs} {
				reqs = append(reqs, cuda.LogprobRow{Row: row, Token: int32(r.IntN(vocab)), K: k})
			}
		}
		got := make([]cuda.RowLogprobs, len(reqs))
		if err := be.Logprobs(lt, reqs, got); err != nil {
			t.Fatal(err)
		}
		for i, q := range reqs {
			want := logprobOf(logits[q.Row*vocab:(q.Row+1)*vocab], q.Token, q.K)
			if !nearLogprob(got[i].Logprob, want.Logprob) || len(got[i].Top) != len(want.Top) {
				t.Fatalf("vocab %d %+v: device %v with %d top, host %v with %d", vocab, q, got[i].Logprob, len(got[i].Top), want.Logprob, len(want.Top))
			}
			for j, w := range want.Top {
				if g := got[i].Top[j]; g.ID != w.ID || !nearLogprob(g.Logprob, w.Logprob) {
					t.Fatalf("vocab %d %+v: device top %d %+v, host %+v", vocab, q, j, g, w)
				}
			}
		}
	}
}

func nearLogprob(a, b float32) bool {
	if math.IsInf(float64(a), -1) || math.IsInf(float64(b), -1) {
		return a == b
	}
	return math.Abs(float64(a-b)) <= 2e-6*max(1, math.Abs(float64(b)))
}

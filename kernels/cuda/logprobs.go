//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// MaxTopLogprobs is the most alternatives Logprobs gives a row (OpenAI's
// top_logprobs limit, engine.MaxTopLogprobs).
const MaxTopLogprobs = 20

// lpWords is the kernel's answer per row in int32s (LP_WORDS).
const lpWords = 1 + 2*MaxTopLogprobs

// The row requests and answers are kernels' own types (the engine's), so
// LogprobRows hands them over without a copy.
type (
	LogprobRow  = kernels.LogprobRow
	RowLogprobs = kernels.RowLogprobs
	TopLogprob  = kernels.TopLogprob
)

// Logprobs computes, on the device, the logprobs rows ask for from logits
// ([n, vocab] F32) into dst (one per row): only 41 int32s a row cross to
// the host, never the row itself. It ends the step like Read. The engine
// finds it by type assertion on the backend, as Sample.
func (b *Backend) Logprobs(logits kernels.Tensor, rows []LogprobRow, dst []RowLogprobs) error {
	lt, err := f32Of(logits, "Logprobs logits")
	if err != nil {
		return err
	}
	vocab := lt.cols()
	n := int(lt.elems()) / vocab
	if len(dst) != len(rows) {
		return fmt.Errorf("cuda backend: Logprobs: %d rows into %d answers", len(rows), len(dst))
	}
	tab := make([]int32, 0, 4*len(rows))
	for i, r := range rows {
		if r.Row < 0 || r.Row >= n || r.Token < 0 || int(r.Token) >= vocab || r.K < 0 || r.K > MaxTopLogprobs {
			return fmt.Errorf("cuda backend: Logprobs: request %d (%+v) outside %d rows of %d logits, k 0-%d", i, r, n, vocab, MaxTopLogprobs)
		}
		tab = append(tab, int32(r.Row), r.Token, int32(r.K), 0)
	}
	if len(rows) == 0 {
		return nil
	}
	words := make([]int32, lpWords*len(rows))
	// The answers land in b.tokens, Sample's buffer: both download before
	// returning, so one never finds the other's launch pending.
	err = b.do(func() error {
		off := b.step.push(tab)
		if err := b.ensure(&b.tokens, int64(4*len(words))); err != nil {
			return err
		}
		if err := b.launch("topk_logprobs", [3]int{len(rows), 1, 1}, [3]int{1024, 1, 1},
			ptrArg(b.tokens.ptr), ptrArg(lt.ptr), tabArg(off), intArg(vocab)); err != nil {
			return err
		}
		if err := b.flush(); err != nil {
			return err
		}
		return b.download(unsafe.Pointer(&words[0]), b.tokens.ptr, int64(4*len(words)))
	})
	if err != nil {
		return err
	}
	for i, r := range rows {
		w := words[lpWords*i : lpWords*(i+1)]
		d := RowLogprobs{Logprob: math.Float32frombits(uint32(w[0]))}
		for j := range r.K {
			if id := w[1+2*j]; id >= 0 {
				d.Top = append(d.Top, TopLogprob{ID: id, Logprob: math.Float32frombits(uint32(w[2+2*j]))})
			}
		}
		dst[i] = d
	}
	return nil
}

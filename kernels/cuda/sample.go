//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// SampleParams are one row's sampling settings: kernels.SampleParams, the
// type the engine fills, so a step's parameters reach the kernel uncopied.
type SampleParams = kernels.SampleParams

// Undecided is the id Sample leaves for a row it does not decide on the
// device (top-p without top-k; a top-k set of more than 1,024 candidates
// with ties): the caller samples that row from its logits.
const Undecided = -1

// sampleWords is the kernel's struct SampleParams in int32s.
const sampleWords = 12

// penalize says whether p's penalties change any logit.
func penalize(p *SampleParams) bool {
	return (p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1) || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// Sample picks one token per row of logits ([rows, vocab] F32, rows =
// len(params)) on the device and writes the ids to dst, Undecided where the
// caller must sample: only len(dst) int32s cross to the host, and the
// logits are left as they were (penalties work on a copy). It ends the step
// like Read. The engine finds it by type assertion on the backend (an
// optional capability beside kernels.Backend).
func (b *Backend) Sample(logits kernels.Tensor, params []SampleParams, dst []int32) error {
	lt, err := f32Of(logits, "Sample logits")
	if err != nil {
		return err
	}
	rows, vocab := len(params), lt.cols()
	if len(dst) != rows || int64(rows*vocab) > lt.elems() {
		return fmt.Errorf("cuda backend: Sample: %d rows of %d logits from %v into %d ids", rows, vocab, lt.shape, len(dst))
	}
	if rows == 0 {
		return nil
	}
	tab, penalties := sampleTable(params, vocab)
	// The ids land in b.tokens, a buffer of the CUDA goroutine's: the launch
	// is recorded there, after do has run the step that made the logits.
	return b.do(func() error {
		off := b.step.push(tab)
		if err := b.ensure(&b.tokens, int64(4*rows)); err != nil {
			return err
		}
		work := devPtr(0)
		if penalties {
			if err := b.ensure(&b.work, int64(4*rows*vocab)); err != nil {
				return err
			}
			work = b.work.ptr
		}
		if err := b.launch("sample", [3]int{rows, 1, 1}, [3]int{1024, 1, 1},
			ptrArg(b.tokens.ptr), ptrArg(lt.ptr), ptrArg(work), tabArg(off), intArg(vocab)); err != nil {
			return err
		}
		if err := b.flush(); err != nil {
			return err
		}
		return b.download(unsafe.Pointer(&dst[0]), b.tokens.ptr, int64(4*rows))
	})
}

// sampleTable lays out the kernel's params: a row of sampleWords int32 per
// row, then each row's penalized tokens as (id, count) pairs, ids ascending.
func sampleTable(params []SampleParams, vocab int) (tab []int32, penalties bool) {
	tab = make([]int32, sampleWords*len(params), sampleWords*len(params)+8)
	counts := map[int32]int32{}
	for i := range params {
		p := &params[i]
		row := tab[sampleWords*i : sampleWords*(i+1)]
		u := math.Float64bits(p.U)
		row[0], row[1], row[2] = f32Word(p.Temperature), f32Word(p.TopP), f32Word(p.MinP)
		row[3] = p.TopK
		row[4], row[5], row[6] = f32Word(p.RepetitionPenalty), f32Word(p.PresencePenalty), f32Word(p.FrequencyPenalty)
		row[9], row[10] = int32(uint32(u)), int32(uint32(u>>32))
		pen := penalize(p) && len(p.Penalized) > 0
		if !pen && len(p.Bias) == 0 {
			continue
		}
		clear(counts)
		if pen {
			for _, t := range p.Penalized {
				if t >= 0 && int(t) < vocab {
					counts[t]++
				}
			}
		}
		ids := make([]int32, 0, len(counts))
		for t := range counts {
			ids = append(ids, t)
		}
		slices.Sort(ids)
		tab[sampleWords*i+7], tab[sampleWords*i+8] = int32(len(tab)), int32(len(ids))
		for _, t := range ids {
			tab = append(tab, t, counts[t])
		}
		// The bias pairs follow the penalty pairs, ids ascending so that a
		// step's table does not depend on map order.
		ids = ids[:0]
		for t := range p.Bias {
			if t >= 0 && int(t) < vocab {
				ids = append(ids, t)
			}
		}
		slices.Sort(ids)
		tab[sampleWords*i+11] = int32(len(ids))
		for _, t := range ids {
			tab = append(tab, t, f32Word(p.Bias[t]))
		}
		penalties = true // either needs the kernel's copy of the row
	}
	return tab, penalties
}

func f32Word(f float32) int32 { return int32(math.Float32bits(f)) }

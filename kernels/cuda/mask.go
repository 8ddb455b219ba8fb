//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// MaskLogits sets to −Inf, on the device, the logits ([rows, vocab] F32) of
// the tokens each row's bitset does not allow: masks[r] is row r's bitset,
// token t allowed when bit t%32 of masks[r][t/32] is set, (vocab+31)/32
// words as engine.Constraint writes them; nil for a row without a
// constraint, which is left as it is. Like the ops it records a launch and
// returns: the bitsets go up with the step's tables and the kernel runs
// before a Sample or Read that follows, so a constrained row is sampled on
// the device without its logits crossing to the host. The engine finds it
// by type assertion beside Sample.
func (b *Backend) MaskLogits(logits kernels.Tensor, masks [][]uint32) error {
	lt, err := f32Of(logits, "MaskLogits logits")
	if err != nil {
		return err
	}
	vocab := lt.cols()
	words := (vocab + 31) / 32
	if int64(len(masks)*vocab) > lt.elems() {
		return fmt.Errorf("cuda backend: MaskLogits: %d rows of %d logits in %v", len(masks), vocab, lt.shape)
	}
	n := 0
	for r, m := range masks {
		switch {
		case m == nil:
		case len(m) != words:
			return fmt.Errorf("cuda backend: MaskLogits: row %d's mask has %d words, want %d for %d tokens", r, len(m), words, vocab)
		default:
			n++
		}
	}
	if n == 0 {
		return nil
	}
	// The table (mask.cu): the masked rows' indices, then their bitsets,
	// appended in place so that a step allocates nothing for it.
	s := &b.step
	off := len(s.tab)
	for r, m := range masks {
		if m != nil {
			s.tab = append(s.tab, int32(r))
		}
	}
	for _, m := range masks {
		for _, w := range m {
			s.tab = append(s.tab, int32(w))
		}
	}
	grid := [3]int{min(ceilDiv(vocab, 256), 256), n, 1}
	return b.launch("mask_logits", grid, [3]int{256, 1, 1}, ptrArg(lt.ptr), tabArg(off), intArg(n), intArg(vocab), intArg(words))
}

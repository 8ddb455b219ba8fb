//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

// SampleParams are one row's sampling settings. Temperature ≤ 0 or TopK == 1
// is greedy; TopK ≤ 0 and TopP ≥ 1 switch those filters off. U is a uniform
// draw in [0, 1) made by the caller (its seeded RNG), so runs reproduce.
type SampleParams struct {
	Temperature float32
	TopP        float32
	TopK        int32
	U           float32
}

// Sample picks one token per row of logits ([rows, vocab] F32, rows =
// len(params)) on the device and writes the ids to dst: only len(dst) int32s
// cross to the host. It ends the step like Read. The engine finds it by type
// assertion on the backend (an optional capability beside kernels.Backend).
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
	// the kernel's struct SampleParams {float temperature, topP, u; int topK}
	tab := make([]int32, 0, 4*rows)
	for _, p := range params {
		tab = append(tab, int32(math.Float32bits(p.Temperature)), int32(math.Float32bits(p.TopP)),
			int32(math.Float32bits(p.U)), p.TopK)
	}
	// The ids land in b.tokens, a buffer of the CUDA goroutine's: the launch
	// is recorded there, after do has run the step that made the logits.
	return b.do(func() error {
		off := b.step.push(tab)
		if err := b.ensure(&b.tokens, int64(4*rows)); err != nil {
			return err
		}
		if err := b.launch("sample", [3]int{rows, 1, 1}, [3]int{1024, 1, 1},
			ptrArg(b.tokens.ptr), ptrArg(lt.ptr), tabArg(off), intArg(vocab)); err != nil {
			return err
		}
		if err := b.flush(); err != nil {
			return err
		}
		return b.drv.download(unsafe.Pointer(&dst[0]), b.tokens.ptr, int64(4*rows))
	})
}

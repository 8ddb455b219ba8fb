package cpu

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// ropeTable caches cos/sin of pos·invFreq[i] for positions [0, n): every layer
// rotates q and k at the same positions, so computing them once per position
// saves 2·layers sincos calls per element.
//
//	cos[pos*half + i], sin[pos*half + i]
type ropeTable struct {
	half     int
	n        int
	cos, sin []float32
}

func (t *ropeTable) grow(invFreq []float32, upTo int) {
	if upTo <= t.n {
		return
	}
	n := max(upTo, 2*t.n, 256)
	cos := make([]float32, n*t.half)
	sin := make([]float32, n*t.half)
	copy(cos, t.cos)
	copy(sin, t.sin)
	for p := t.n; p < n; p++ {
		for i, f := range invFreq {
			s, c := math.Sincos(float64(p) * float64(f))
			cos[p*t.half+i], sin[p*t.half+i] = float32(c), float32(s)
		}
	}
	t.n, t.cos, t.sin = n, cos, sin
}

func (b *Backend) RoPE(x, invFreq kernels.Tensor, pos []int32, heads int, style kernels.RoPEStyle) error {
	xs, xt, err := f32Of(x, "RoPE x")
	if err != nil {
		return err
	}
	freq, ft, err := f32Of(invFreq, "RoPE invFreq")
	if err != nil {
		return err
	}
	cols := xt.cols()
	if heads <= 0 || cols%heads != 0 {
		return fmt.Errorf("cpu backend: RoPE: %d columns do not split into %d heads", cols, heads)
	}
	headDim := cols / heads
	half := len(freq)
	if 2*half > headDim || len(pos)*cols > len(xs) {
		return fmt.Errorf("cpu backend: RoPE: %d frequencies for head size %d, %d rows", half, headDim, len(pos))
	}
	tab := b.rope[ft]
	if tab == nil {
		tab = &ropeTable{half: half}
		b.rope[ft] = tab
	}
	maxPos := int32(-1)
	for _, p := range pos {
		if p < 0 {
			return fmt.Errorf("cpu backend: RoPE: negative position %d", p)
		}
		maxPos = max(maxPos, p)
	}
	tab.grow(freq, int(maxPos)+1)
	// Pair (a, b) of element indices rotated by frequency i.
	stride, offset := 2, 1 // interleaved: (2i, 2i+1)
	if style == kernels.RoPEHalves {
		stride, offset = 1, headDim/2 // halves: (i, i+d/2)
	}
	for r, p := range pos {
		cs := tab.cos[int(p)*half : int(p)*half+half]
		sn := tab.sin[int(p)*half : int(p)*half+half]
		for h := range heads {
			v := xs[r*cols+h*headDim : r*cols+(h+1)*headDim]
			for i := range half {
				a, bIdx := i*stride, i*stride+offset
				x0, x1 := v[a], v[bIdx]
				v[a] = x0*cs[i] - x1*sn[i]
				v[bIdx] = x0*sn[i] + x1*cs[i]
			}
		}
	}
	return nil
}

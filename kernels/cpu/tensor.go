package cpu

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// tensor is the CPU backend's handle: either F32 scratch (f32 set) or raw
// weight bytes in dtype's block layout (raw set, possibly an mmap).
type tensor struct {
	shape  []int
	dtype  kernels.DType
	f32    []float32
	raw    []byte
	amx    amxCacheSlot   // the weight's unpacked AMX tiles (amxcache.go)
	layout *groupedLayout // raw is a Q4_1 or Q8_0 matrix in this grouped layout (x16pack.go), or nil
	// next: the weights of the product that followed this one's last time
	// (readahead.go); the backend's caller alone reads and writes it.
	next opWeights
}

func (t *tensor) Shape() []int         { return t.shape }
func (t *tensor) DType() kernels.DType { return t.dtype }

// rows and cols view the tensor as [rows, cols]; a vector is one row.
func (t *tensor) cols() int { return t.shape[len(t.shape)-1] }
func (t *tensor) rows() int {
	r := 1
	for _, d := range t.shape[:len(t.shape)-1] {
		r *= d
	}
	return r
}

func asCPU(t kernels.Tensor) (*tensor, error) {
	c, ok := t.(*tensor)
	if !ok {
		return nil, fmt.Errorf("cpu backend: tensor %T was not made by this backend", t)
	}
	return c, nil
}

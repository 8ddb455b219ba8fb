package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkRowsKernels runs one L1-resident tile (16 weight rows of 576)
// against eight activation rows through each row-kernel form: the compute
// ceiling of each, without matMul's quantization and scheduling around it.
func BenchmarkRowsKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	const rows, in = 16, 576
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q5_0, kernels.Q8_0} {
		k := quantKernels[dt]
		nb := in / dt.BlockElems()
		wb := dt.RowBytes(in)
		w := mustQuantize(b, dt, randVec(r, rows*in))
		xrb := nb * k.actBlockBytes
		xq := make([]byte, 8*xrb)
		for j := range 8 {
			k.quantize(xq[j*xrb:(j+1)*xrb], randVec(r, in))
		}
		dst := make([]float32, 8*rows)
		// Scales as matMul converts them, once per call (not timed).
		sc4, sc8 := make([]float32, 16*nb), make([]float32, 16*nb)
		for j := 0; j < 8; j += 4 {
			actScales(sc4[j*2*nb:], xq[j*xrb:], xrb, k.actBlockBytes, nb, 4)
		}
		actScales(sc8, xq, xrb, k.actBlockBytes, nb, 8)
		forms := []struct {
			name string
			run  func()
			ok   bool
		}{
			{"rows", func() {
				for j := range 8 {
					k.rows(dst[j*rows:(j+1)*rows], w, wb, xq[j*xrb:], nb)
				}
			}, true},
			{"rows2", func() {
				for j := 0; j < 8; j += 2 {
					k.rows2(dst[j*rows:(j+1)*rows], dst[(j+1)*rows:(j+2)*rows], w, wb, xq[j*xrb:], xq[(j+1)*xrb:], nb)
				}
			}, k.rows2 != nil},
			{"rows4", func() {
				for j := 0; j < 8; j += 4 {
					k.rows4(dst[j*rows:], rows, w, wb, rows, xq[j*xrb:], xrb, sc4[j*2*nb:], nb)
				}
			}, k.rows4 != nil},
			{"rows8", func() {
				k.rows8(dst, rows, w, wb, rows, xq, xrb, sc8, nb)
			}, k.rows8 != nil},
		}
		for _, f := range forms {
			if !f.ok {
				continue
			}
			b.Run(dt.String()+"/"+f.name, func(b *testing.B) {
				cpu0 := processCPU()
				for b.Loop() {
					f.run()
				}
				reportFlops(b, 2*8*rows*in, processCPU()-cpu0)
			})
		}
	}
}

package cpu

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// MXFP4 weights dot Q8_0 activations, as ggml's CPU backend pairs them
// (vec_dot_type GGML_TYPE_Q8_0): per block, the codes' doubled values
// (kvalues_mxfp4) times the activation's int8s, summed in integers, scaled
// by the activation's F16 scale times the halved E8M0 scale.
// A package variable, so that it exists before any init runs: dot.go's
// init, which fills rows, may run before this file's, and dot_mxfp4_amd64.go's
// replaces rows with the assembly kernel.
var mxfp4Kernel = &quantKernel{actBlockBytes: quant.Q8_0BlockBytes, quantize: quant.ActQ8_0,
	generic: dotMXFP4Q8_0Generic, rows: genericRows(dotMXFP4Q8_0Generic)}

func init() { quantKernels[kernels.MXFP4] = mxfp4Kernel }

// dotMXFP4Q8_0Generic is ggml_vec_dot_mxfp4_q8_0_generic.
func dotMXFP4Q8_0Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := w[b*quant.MXFP4BlockBytes:(b+1)*quant.MXFP4BlockBytes], x[b*34:b*34+34]
		d := f16le(xb) * quant.E8M0Half(wb[0])
		var s1, s2 int32
		for j := range 16 {
			q := wb[1+j]
			s1 += int32(int8(xb[2+j])) * int32(quant.KValuesMXFP4[q&0xf])
			s2 += int32(int8(xb[18+j])) * int32(quant.KValuesMXFP4[q>>4])
		}
		sum += d * float32(s1+s2)
	}
	return sum
}

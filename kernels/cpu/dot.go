package cpu

import (
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// rowsDot sets dst[r] = Σ_k W_r[k]·X[k] for r < len(dst), where row r of W
// starts at w[r*wstride]: a run of weight rows against one activation row.
type rowsDot func(dst []float32, w []byte, wstride int, x []byte, nb int)

// rows2Dot is rowsDot for two activation rows at once (dst0 from x0, dst1
// from x1), bit-identical to two rowsDot calls but reading the weights once.
type rows2Dot func(dst0, dst1 []float32, w []byte, wstride int, x0, x1 []byte, nb int)

// rowsMDot is rowsDot for m activation rows at once (m = 4 for rows4, 8 for
// rows8): rows weight rows (wstride apart) against activation rows x,
// x[xstride:], ..., x[(m−1)·xstride:] into dst[j·dstride+r], bit-identical
// to m rowsDot calls but unpacking each weight block once for the m. sc
// holds the m rows' block scales as f32, laid out by actScales.
type rowsMDot func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, sc []float32, nb int)

// vecDot returns Σ_k W[k]·X[k] for one weight row w of nb blocks and one
// activation row x of nb blocks in the weight type's partner format.
type vecDot func(w, x []byte, nb int) float32

// quantKernel is how matMul handles one quantized weight type, as ggml's
// type_traits_cpu does: the activation row is first quantized to the partner
// format (vec_dot_type), then dotted block by block in integers.
type quantKernel struct {
	actBlockBytes int                           // bytes per activation block (same element count as a weight block)
	quantize      func(dst []byte, x []float32) // activation row → partner blocks
	generic       vecDot                        // pure Go, the reference
	rows          rowsDot                       // fastest available; set in init
	rows2         rows2Dot                      // optional batched form of rows
	rows4, rows8  rowsMDot                      // optional, for four and eight activation rows
	// rows2M and rows3 are optional rowsMDot kernels for two and three
	// activation rows (rows2M before rows2 where both exist). A speculative
	// verify step's 1+k rows leave 2, 3, 6 or 7 after the groups of 8 and
	// 4; without them those took rows2 and, for an odd one, a second pass
	// over the weights through rows.
	rows2M, rows3 rowsMDot
	pad           padding // which last groups go to a wider kernel; the zero value never pads
}

// padding says which last groups of activation rows go to a wider kernel
// with padding rows whose results are dropped: at least to8 rows (fewer
// than 8) to rows8, at least to4 (fewer than 4) to rows4. 0, 8 and 4 mean
// never; padding is set where it pays, by measurement (dot_amd64.go).
type padding struct{ to8, to4 int }

func init() {
	for _, k := range quantKernels {
		if k.rows == nil { // not claimed by an assembly kernel
			k.rows = genericRows(k.generic)
		}
	}
}

// genericRows runs a one-row kernel over a run of rows.
func genericRows(dot vecDot) rowsDot {
	return func(dst []float32, w []byte, wstride int, x []byte, nb int) {
		for r := range dst {
			dst[r] = dot(w[r*wstride:], x, nb)
		}
	}
}

// quantKernels is filled for the pure-Go path here; init in dot_amd64.go
// replaces rows with assembly where the CPU allows it.
var quantKernels = map[kernels.DType]*quantKernel{
	kernels.Q4_0: {actBlockBytes: quant.Q8_0BlockBytes, quantize: quant.ActQ8_0, generic: dotQ4_0Q8_0Generic},
	kernels.Q4_1: {actBlockBytes: quant.Q8_1BlockBytes, quantize: quant.ActQ8_1, generic: dotQ4_1Q8_1Generic},
	kernels.Q5_0: {actBlockBytes: quant.Q8_0BlockBytes, quantize: quant.ActQ8_0, generic: dotQ5_0Q8_0Generic},
	kernels.Q5_1: {actBlockBytes: quant.Q8_1BlockBytes, quantize: quant.ActQ8_1, generic: dotQ5_1Q8_1Generic},
	kernels.Q8_0: {actBlockBytes: quant.Q8_0BlockBytes, quantize: quant.ActQ8_0, generic: dotQ8_0Q8_0Generic},
	kernels.Q4_K: {actBlockBytes: quant.Q8_KBlockBytes, quantize: quant.ActQ8_K, generic: dotQ4_KQ8_KGeneric},
	kernels.Q5_K: {actBlockBytes: quant.Q8_KBlockBytes, quantize: quant.ActQ8_K, generic: dotQ5_KQ8_KGeneric},
	kernels.Q6_K: {actBlockBytes: quant.Q8_KBlockBytes, quantize: quant.ActQ8_K, generic: dotQ6_KQ8_KGeneric},
	kernels.Q8_K: {actBlockBytes: quant.Q8_KBlockBytes, quantize: quant.ActQ8_K, generic: dotQ8_KQ8_KGeneric},
}

// dotF32 is Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dotF32(a, b []float32) float32 {
	if useAVX2 && len(a) >= 8 {
		return dotF32Fast(a, b)
	}
	return dotF32Generic(a, b)
}

// expF32 sets dst[i] = exp(x[i] − sub) and returns Σ dst[i] (softmax:
// sub is the row's maximum). dst may be x. The AVX2 path uses ggml's
// vectorized expf (≤ ~2 ulp); the sum's order is lane-wise.
func expF32(dst, x []float32, sub float32) float32 {
	if useAVX2 && len(x) >= 8 {
		return expF32Fast(dst, x, sub)
	}
	return expF32Generic(dst, x, sub)
}

// siluMulF32 sets dst[i] = silu(gate[i])·up[i] = gate[i]/(1+exp(−gate[i]))·up[i]
// (SwiGLU) over len(dst) elements. dst may alias gate or up.
func siluMulF32(dst, gate, up []float32) {
	if useAVX2 && len(dst) >= 8 {
		siluMulF32Fast(dst, gate, up)
		return
	}
	siluMulF32Generic(dst, gate, up)
}

func expF32Generic(dst, x []float32, sub float32) float32 {
	dst = dst[:len(x)]
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - sub)))
		dst[i] = e
		sum += e
	}
	return sum
}

func siluMulF32Generic(dst, gate, up []float32) {
	gate, up = gate[:len(dst)], up[:len(dst)]
	for i, g := range gate {
		dst[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// dotHalf is Σ W[k]·x[k] for a row of F16 or BF16 weights (raw little-endian
// halves, len(x) of them) against f32 activations.
func dotHalf(dt kernels.DType, w []byte, x []float32) float32 {
	if dt == kernels.BF16 {
		if useAVX2 && len(x) >= 8 {
			return dotBF16F32Fast(w, x)
		}
		return dotBF16F32Generic(w, x)
	}
	if useAVX2 && len(x) >= 8 {
		return dotF16F32Fast(w, x)
	}
	return dotF16F32Generic(w, x)
}

// actScales converts the f16 scales of m quantized activation rows (x,
// x[xstride:], ...; Q8_0 or Q8_1 blocks of bb bytes) to f32 for a rowsMDot:
// per block m d's then m s's (Q8_1's d·Σq; zero for Q8_0), 2·m floats.
// Converted once per call instead of once per weight row they meet.
func actScales(sc []float32, x []byte, xstride, bb, nb, m int) {
	sc = sc[:nb*2*m]
	for j := range m {
		xj := x[j*xstride:]
		for b := range nb {
			blk := xj[b*bb:]
			sc[b*2*m+j] = quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
			s := float32(0)
			if bb == quant.Q8_1BlockBytes {
				s = quant.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
			}
			sc[b*2*m+m+j] = s
		}
	}
}

package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestE8M0Half: 2^(e−128) for every exponent, the two subnormal ones
// included, as ggml_e8m0_to_fp32_half computes it.
func TestE8M0Half(t *testing.T) {
	for e := range 255 {
		if got, want := E8M0Half(uint8(e)), float32(math.Ldexp(1, e-128)); got != want {
			t.Fatalf("E8M0Half(%d) = %g, want %g", e, got, want)
		}
	}
}

// TestMXFP4Block: one block by hand. e = 129 makes the scale 2; code 7 is
// 12 doubled (E2M1 6.0), code 13 −6 (−3.0), code 8 is −0.
func TestMXFP4Block(t *testing.T) {
	blk := make([]byte, MXFP4BlockBytes)
	blk[0] = 129
	blk[1] = 0x7d // element 0: code 13, element 16: code 7
	blk[16] = 0x18
	x := make([]float32, 32)
	if err := Dequantize(kernels.MXFP4, blk, x); err != nil {
		t.Fatal(err)
	}
	if x[0] != -12 || x[16] != 24 || x[15] != 0 || x[31] != 2 || x[1] != 0 {
		t.Fatalf("dequantized %v", x)
	}
}

// TestMXFP4RoundTrip: a quantized block dequantizes within half a step of
// the codes' grid at its scale, and quantizing the result again gives the
// same bytes.
func TestMXFP4RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 32*64)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(20)-10))
	}
	q, err := Quantize(kernels.MXFP4, src)
	if err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(src))
	if err := Dequantize(kernels.MXFP4, q, back); err != nil {
		t.Fatal(err)
	}
	for b := range len(src) / 32 {
		d := E8M0Half(q[b*MXFP4BlockBytes])
		for j := range 32 {
			i := b*32 + j
			// The grid's widest gap is 4 (8 to 12, doubled values), and
			// values past 12·d clip to it.
			if v := math.Abs(float64(src[i])); v <= 12*float64(d) && math.Abs(float64(back[i]-src[i])) > 2*float64(d)*(1+1e-6) {
				t.Fatalf("block %d element %d: %g → %g (scale %g)", b, j, src[i], back[i], d)
			}
		}
	}
	again, err := Quantize(kernels.MXFP4, back)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(q) {
		t.Fatal("quantizing the dequantized values gave other bytes")
	}
}

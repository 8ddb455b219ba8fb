package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestGeGLUMoEFFNFused: Gemma 4's experts with gate and up fused as one
// [experts, 2·ffn, hidden] tensor (up nil) give the bits of the same
// experts apart, on the float path and the grouped quantized one, for
// experts holding 1 to 9 rows of a batch; per-expert output scales of 2
// double the mixture exactly.
func TestGeGLUMoEFFNFused(t *testing.T) {
	const experts, n, k = 8, 40, 2
	for _, tc := range []struct {
		dt          kernels.DType
		hidden, ffn int
	}{{kernels.F32, 64, 96}, {kernels.Q8_0, 64, 96}, {kernels.Q4_K, 256, 256}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(tc.hidden)))
			b := New(2)
			defer b.Close()
			h, f := tc.hidden, tc.ffn
			upload := func(v []float32, shape ...int) kernels.Tensor {
				w, err := b.Upload(kernels.HostTensor{Name: "w", DType: tc.dt, Shape: shape, Data: mustQuantize(t, tc.dt, v)})
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			gv, uv := randF32(r, experts*f*h), randF32(r, experts*f*h)
			fused := make([]float32, 0, 2*len(gv))
			for e := range experts {
				fused = append(fused, gv[e*f*h:(e+1)*f*h]...)
				fused = append(fused, uv[e*f*h:(e+1)*f*h]...)
			}
			gate, up, gateUp := upload(gv, experts, f, h), upload(uv, experts, f, h), upload(fused, experts, 2*f, h)
			down := upload(randF32(r, experts*h*f), experts, h, f)
			twos := make([]float32, experts)
			for i := range twos {
				twos[i] = 2
			}
			x, logits := scratch(t, b, randF32(r, n*h), n, h), scratch(t, b, randF32(r, n*experts), n, experts)
			apart, one, two := scratch(t, b, nil, n, h), scratch(t, b, nil, n, h), scratch(t, b, nil, n, h)
			if err := b.GeGLUMoEFFN(apart, x, logits, gate, up, down, nil, n, k, true); err != nil {
				t.Fatal(err)
			}
			if err := b.GeGLUMoEFFN(one, x, logits, gateUp, nil, down, nil, n, k, true); err != nil {
				t.Fatal(err)
			}
			if err := b.GeGLUMoEFFN(two, x, logits, gateUp, nil, down, scratch(t, b, twos, experts), n, k, true); err != nil {
				t.Fatal(err)
			}
			a, o, w := apart.(*tensor).f32, one.(*tensor).f32, two.(*tensor).f32
			for i := range a {
				if o[i] != a[i] || w[i] != 2*a[i] {
					t.Fatalf("element %d (row %d): apart %g, fused %g, fused with scales 2 %g", i, i/h, a[i], o[i], w[i])
				}
			}
		})
	}
}

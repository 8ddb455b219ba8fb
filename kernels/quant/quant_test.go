package quant

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestDequantizeGolden checks decoding bit for bit against gguf-py
// (testdata/gen_golden.py): random blocks of every type it knows, and the first
// blocks of real Q4_1 and Q8_0 tensors of the default model.
func TestDequantizeGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/dequant_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Name, Type, Raw string
			Want            []float64
		}
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for _, c := range golden.Cases {
		t.Run(c.Type+"/"+c.Name, func(t *testing.T) {
			dt, ok := typeByName[c.Type]
			if !ok {
				t.Fatalf("unknown type %q", c.Type)
			}
			raw, err := hex.DecodeString(c.Raw)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(c.Want))
			if err := Dequantize(dt, raw, got); err != nil {
				t.Fatal(err)
			}
			for i, w := range c.Want {
				if got[i] != float32(w) {
					t.Fatalf("element %d: got %v, want %v", i, got[i], float32(w))
				}
			}
		})
	}
}

var allTypes = []kernels.DType{
	kernels.F32, kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_1, kernels.Q5_0,
	kernels.Q5_1, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.Q8_K,
}

// typeByName maps the golden files' type names to allTypes.
var typeByName = func() map[string]kernels.DType {
	m := map[string]kernels.DType{}
	for _, dt := range allTypes {
		m[dt.String()] = dt
	}
	return m
}()

// TestRoundTrip bounds the error of Quantize→Dequantize on N(0,1) data (plus
// an offset block, which stresses the min of the affine types).
//
// Per-element bounds follow from each format's step: symmetric 4/5-bit types
// put the extreme element on −2^(b−1), so the opposite end clips up to one
// step; affine types err at most half a step plus the f16 rounding of d and m.
// K-quants search their scales, so they are bounded by RMS relative to the
// data's RMS: uniform quantization noise is step/√12, which for a Gaussian
// sub-block (range ≈ 4.5σ) gives ≈ 0.09σ (4 bits), 0.04σ (5 bits), 0.02σ
// (Q6_K, 16-element groups); the scale search measures 0.061, 0.032, 0.017 and
// the limits leave ~1.5× headroom.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		dt      kernels.DType
		elemTol func(blk []float32) float32 // max |error| within a block; nil: RMS only
		relRMS  float64
	}{
		{kernels.F32, func([]float32) float32 { return 0 }, 0},
		{kernels.F16, func(b []float32) float32 { return amaxOf(b) * 0x1p-11 }, 1e-3},
		{kernels.BF16, func(b []float32) float32 { return amaxOf(b) * 0x1p-8 }, 5e-3},
		{kernels.Q8_0, func(b []float32) float32 { return amaxOf(b) / 127 * 0.57 }, 0.01},
		{kernels.Q4_0, func(b []float32) float32 { return amaxOf(b) / 8 * 1.01 }, 0.11},
		{kernels.Q5_0, func(b []float32) float32 { return amaxOf(b) / 16 * 1.01 }, 0.055},
		{kernels.Q4_1, func(b []float32) float32 { return rangeOf(b)/15*0.52 + amaxOf(b)*0x1p-10 }, 0.1},
		{kernels.Q5_1, func(b []float32) float32 { return rangeOf(b)/31*0.54 + amaxOf(b)*0x1p-10 }, 0.05},
		{kernels.Q8_K, func(b []float32) float32 { return amaxOf(b) / 127 * 0.501 }, 0.01},
		{kernels.Q4_K, nil, 0.09},
		{kernels.Q5_K, nil, 0.045},
		{kernels.Q6_K, nil, 0.025},
	}
	for _, tc := range tests {
		t.Run(tc.dt.String(), func(t *testing.T) {
			x := testData(1024, 1)
			q, err := Quantize(tc.dt, x)
			if err != nil {
				t.Fatal(err)
			}
			if len(q) != tc.dt.RowBytes(len(x)) {
				t.Fatalf("got %d bytes, want %d", len(q), tc.dt.RowBytes(len(x)))
			}
			y := make([]float32, len(x))
			if err := Dequantize(tc.dt, q, y); err != nil {
				t.Fatal(err)
			}
			var se, sx float64
			for i := range x {
				d := float64(y[i] - x[i])
				se += d * d
				sx += float64(x[i]) * float64(x[i])
			}
			rel := math.Sqrt(se / sx)
			t.Logf("rel %.4f", rel)
			if rel > tc.relRMS {
				t.Errorf("relative RMS error %.4f > %.4f", rel, tc.relRMS)
			}
			if tc.elemTol == nil {
				return
			}
			be := tc.dt.BlockElems()
			if be == 1 {
				be = 32
			}
			for b := 0; b < len(x); b += be {
				tol := tc.elemTol(x[b : b+be])
				for i := b; i < b+be; i++ {
					if e := abs32(y[i] - x[i]); e > tol {
						t.Fatalf("element %d: %v → %v, error %g > %g", i, x[i], y[i], e, tol)
					}
				}
			}
		})
	}
}

// testData is N(0,1) noise; the last 256 elements are shifted by offset so the
// affine formats see blocks whose min is far from zero.
func testData(n int, offset float32) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i >= n-256 {
			x[i] += offset
		}
	}
	return x
}

func amaxOf(x []float32) float32 {
	a, _ := absMax(x)
	return a
}

func rangeOf(x []float32) float32 {
	lo, hi := minMax(x)
	return hi - lo
}

// TestZeroBlocks: all-zero input must give all-zero output, not NaN (every
// quantizer divides by its scale somewhere).
func TestZeroBlocks(t *testing.T) {
	for _, dt := range allTypes {
		q, err := Quantize(dt, make([]float32, 256))
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, 256)
		if err := Dequantize(dt, q, y); err != nil {
			t.Fatal(err)
		}
		for i, v := range y {
			if v != 0 {
				t.Fatalf("%v: element %d = %v", dt, i, v)
			}
		}
	}
}

func TestSizeErrors(t *testing.T) {
	tests := []struct {
		name   string
		dt     kernels.DType
		nbytes int
		nelems int
		want   error
	}{
		{"partial block", kernels.Q4_1, 20, 31, ErrSize},
		{"short source", kernels.Q8_0, 33, 32, ErrSize},
		{"long source", kernels.Q4_K, 145, 256, ErrSize},
		{"unknown type", kernels.DType(99), 4, 1, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Dequantize(tc.dt, make([]byte, tc.nbytes), make([]float32, tc.nelems))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestF16 checks every finite half survives a trip through float32, and that
// rounding is to nearest even at midpoints and subnormals.
func TestF16(t *testing.T) {
	for h := range 1 << 16 {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN payloads are canonicalized
		}
		if got := F32ToF16(F16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("%#04x → %v → %#04x", h, F16ToF32(uint16(h)), got)
		}
	}
	tests := []struct {
		in   float32
		want uint16
	}{
		{1 + 0x1p-11, 0x3c00},           // tie → even (down)
		{1 + 3*0x1p-11, 0x3c02},         // tie → even (up)
		{1 + 0x1p-11 + 0x1p-20, 0x3c01}, // just above the tie
		{65520, 0x7c00},                 // rounds to +Inf
		{0x1p-25, 0x0000},               // half the smallest subnormal: tie → 0
		{0x1p-25 + 0x1p-35, 0x0001},     // above it → smallest subnormal
		{-2, 0xc000},
		{float32(math.Inf(-1)), 0xfc00},
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.in); got != tc.want {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if h := F32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN → %#04x", h)
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, // tie → even (down)
		{0x3f818000, 0x3f82}, // tie → even (up)
		{0x3f808001, 0x3f81},
		{0x7fc00001, 0x7fc0},
		{0x7f800001, 0x7fc0}, // signalling NaN stays NaN
	}
	for _, tc := range tests {
		if got := F32ToBF16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if v := BF16ToF32(0xc040); v != -3 {
		t.Errorf("BF16ToF32(0xc040) = %v", v)
	}
}

// TestQuantizeGolden checks the reference quantizers byte for byte against
// gguf-py's (testdata/gen_golden.py), which follow ggml's quantize_row_*_ref,
// and, for the K-quants, against ggml's own C quantizers
// (testdata/gen_kquant_golden.py).
func TestQuantizeGolden(t *testing.T) {
	for _, file := range []string{"testdata/quant_golden.json", "testdata/kquant_golden.json"} {
		testQuantizeGolden(t, file)
	}
}

func testQuantizeGolden(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Type, Want string
			X          []float64
		}
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for _, c := range golden.Cases {
		t.Run(c.Type, func(t *testing.T) {
			x := make([]float32, len(c.X))
			for i, v := range c.X {
				x[i] = float32(v)
			}
			got, err := Quantize(typeByName[c.Type], x)
			if err != nil {
				t.Fatal(err)
			}
			if g := hex.EncodeToString(got); g != c.Want {
				for i := 0; i < len(g); i += 2 {
					if g[i:i+2] != c.Want[i:i+2] {
						t.Fatalf("byte %d: got %s, want %s", i/2, g[i:i+2], c.Want[i:i+2])
					}
				}
			}
		})
	}
}

package cpu

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestMXFP4AgainstGGML compares MXFP4 with llama.cpp v0.5.0's ggml
// (testdata/gen_mxfp4_golden.py): the quantizer's bytes and the
// dequantized values bit for bit, the Q8_0 activation bytes, and the dot
// product up to float summation order (TestAgainstGGML's bound).
func TestMXFP4AgainstGGML(t *testing.T) {
	raw, err := os.ReadFile("testdata/mxfp4_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		X, W        []float64
		Xq, Wq      string
		DequantBits []string `json:"dequant_bits"`
		Dot         float64
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	x, w := f32(g.X), f32(g.W)
	wantWq, _ := hex.DecodeString(g.Wq)
	wantXq, _ := hex.DecodeString(g.Xq)
	wq, err := quant.Quantize(kernels.MXFP4, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wq, wantWq) {
		for b := 0; b < len(wq); b += quant.MXFP4BlockBytes {
			if !bytes.Equal(wq[b:b+quant.MXFP4BlockBytes], wantWq[b:b+quant.MXFP4BlockBytes]) {
				t.Fatalf("block %d: % x, ggml % x", b/quant.MXFP4BlockBytes, wq[b:b+quant.MXFP4BlockBytes], wantWq[b:b+quant.MXFP4BlockBytes])
			}
		}
	}
	deq := mustDequantize(t, kernels.MXFP4, wantWq, len(w))
	for i, h := range g.DequantBits {
		b, _ := hex.DecodeString(h)
		if want := math.Float32frombits(binary.LittleEndian.Uint32(b)); math.Float32bits(deq[i]) != math.Float32bits(want) {
			t.Fatalf("element %d dequantizes to %g, ggml %g", i, deq[i], want)
		}
	}
	k := quantKernels[kernels.MXFP4]
	nb := len(x) / 32
	xq := make([]byte, nb*k.actBlockBytes)
	k.quantize(xq, x)
	if !bytes.Equal(xq, wantXq) {
		t.Fatal("Q8_0 activations differ from ggml's")
	}
	var mag float64
	for i := range x {
		mag += math.Abs(float64(deq[i]) * float64(x[i]))
	}
	for name, got := range map[string]float32{"generic": k.generic(wantWq, xq, nb), "rows": rowsOne(k, wantWq, xq, nb)} {
		if d := math.Abs(float64(got) - g.Dot); d > mag*0x1p-21 {
			t.Errorf("%s: %v, ggml %v (difference %g)", name, got, g.Dot, d)
		} else {
			t.Logf("%s: %v, ggml %v (difference %g)", name, got, g.Dot, d)
		}
	}
}

// TestMXFP4ActQuantizer: MXFP4's activations go through the quantizer every
// other Q8_0 partner has (the assembly one where the CPU has it), not the
// plain-Go fallback an init order left it with. The same bytes either way
// (TestMXFP4AgainstGGML), so the test looks at which code runs.
func TestMXFP4ActQuantizer(t *testing.T) {
	code := func(f func([]byte, []float32)) uintptr { return reflect.ValueOf(f).Pointer() }
	plain := code(quant.ActQ8_0)
	mx, q8 := code(quantKernels[kernels.MXFP4].quantize), code(quantKernels[kernels.Q8_0].quantize)
	if (mx == plain) != (q8 == plain) {
		t.Errorf("MXFP4 quantizes activations with %s, Q8_0 with %s",
			runtime.FuncForPC(mx).Name(), runtime.FuncForPC(q8).Name())
	}
}

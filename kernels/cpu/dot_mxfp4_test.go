package cpu

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
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

// TestMXFP4Rows: the rows kernel over 1 to 11 rows (the four-row, pair and
// single loops, in every mix) gives each row the bits it gets alone, and the
// plain-Go reference's value within TestAgainstGGML's bound, on random
// blocks with a row stride past the blocks, over 1 to 90 blocks, and with
// scales at the ends of the range: e = 0 and 1 (halves the kernels flush to
// 0; the bound's absolute floor is far above them) up to 254 against
// activations small enough that no sum overflows.
func TestMXFP4Rows(t *testing.T) {
	k := quantKernels[kernels.MXFP4]
	r := rand.New(rand.NewPCG(25, 4))
	exps := []uint8{0, 1, 2, 3, 100, 127, 128, 129, 200, 253, 254}
	for _, nb := range []int{1, 2, 3, 90} {
		for rows := 1; rows <= 11; rows++ {
			for _, edge := range []bool{false, true} {
				wstride := nb*quant.MXFP4BlockBytes + r.IntN(2)*5
				w := make([]byte, rows*wstride)
				for i := range w {
					w[i] = byte(r.Uint32())
				}
				for row := range rows {
					for b := range nb {
						e := uint8(110 + r.IntN(30))
						if edge {
							e = exps[r.IntN(len(exps))]
						}
						w[row*wstride+b*quant.MXFP4BlockBytes] = e
					}
				}
				amp := 1.0
				if edge {
					amp = 1e-4 // 2^126 · 12 · 127 · 32 · dx stays below the float32 range
				}
				xf := make([]float32, nb*32)
				for i := range xf {
					xf[i] = float32(r.NormFloat64() * amp)
				}
				xq := make([]byte, nb*quant.Q8_0BlockBytes)
				k.quantize(xq, xf)
				got := make([]float32, rows)
				k.rows(got, w, wstride, xq, nb)
				for row := range rows {
					wr := w[row*wstride : row*wstride+nb*quant.MXFP4BlockBytes]
					var alone [1]float32
					k.rows(alone[:], wr, wstride, xq, nb)
					if math.Float32bits(got[row]) != math.Float32bits(alone[0]) {
						t.Fatalf("nb %d rows %d edge %v row %d: %g among %d rows, %g alone", nb, rows, edge, row, got[row], rows, alone[0])
					}
					want := dotMXFP4Q8_0Generic(wr, xq, nb)
					var mag float64
					for b := range nb {
						wb, xb := wr[b*quant.MXFP4BlockBytes:], xq[b*quant.Q8_0BlockBytes:]
						d := float64(f16le(xb)) * float64(quant.E8M0Half(wb[0]))
						for j := range 16 {
							q := wb[1+j]
							mag += d * math.Abs(float64(int8(xb[2+j]))*float64(quant.KValuesMXFP4[q&0xf]))
							mag += d * math.Abs(float64(int8(xb[18+j]))*float64(quant.KValuesMXFP4[q>>4]))
						}
					}
					if math.IsInf(float64(want), 0) || math.IsNaN(float64(want)) {
						t.Fatalf("nb %d rows %d row %d: reference %g; the test's scales overflow", nb, rows, row, want)
					}
					if d := math.Abs(float64(got[row]) - float64(want)); d > mag*0x1p-21+1e-30 {
						t.Fatalf("nb %d rows %d edge %v row %d: %g, reference %g (difference %g)", nb, rows, edge, row, got[row], want, d)
					}
				}
			}
		}
	}
}

// BenchmarkMXFP4Rows: 64 MXFP4 weight rows against one activation row, at
// the tiny test models' width (2 blocks) and gpt-oss's (2880: 90 blocks).
func BenchmarkMXFP4Rows(b *testing.B) {
	k := quantKernels[kernels.MXFP4]
	r := rand.New(rand.NewPCG(1, 2))
	const rows = 64
	for _, nb := range []int{2, 90} {
		w := make([]byte, rows*nb*quant.MXFP4BlockBytes)
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for i := 0; i < len(w); i += quant.MXFP4BlockBytes {
			w[i] = 120
		}
		xf := make([]float32, nb*32)
		for i := range xf {
			xf[i] = float32(r.NormFloat64())
		}
		xq := make([]byte, nb*quant.Q8_0BlockBytes)
		k.quantize(xq, xf)
		dst := make([]float32, rows)
		b.Run(fmt.Sprintf("nb%d", nb), func(b *testing.B) {
			for b.Loop() {
				k.rows(dst, w, nb*quant.MXFP4BlockBytes, xq, nb)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

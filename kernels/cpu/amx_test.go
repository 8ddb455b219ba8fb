package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestAMXTiles runs the tiled matmul path for every tiled weight type
// against the one-row kernels: the Go form of the tile product everywhere,
// and the AMX assembly where the CPU has it. The block integers are exact
// in both; only the f32 order of the block sums differs, so results agree
// to 2e-5 of the largest output (sums of up to 1536 products). Activation row counts that are no
// multiple of 16 and weight tiles of fewer than 16 rows check the padding,
// and dst cells outside the product must stay untouched.
func TestAMXTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var types []kernels.DType
	for dt := range amxFormats {
		types = append(types, dt)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	kinds := []struct {
		name string
		dot  func(*amxCall)
	}{{"go", amxDotTilesGo}}
	if useAMX {
		kinds = append(kinds, struct {
			name string
			dot  func(*amxCall)
		}{"amx", amxDotTiles})
	}
	for _, dt := range types {
		k := quantKernels[dt]
		for _, in := range []int{32, 64, 96, 160, 256, 640, 1536} {
			if in%dt.BlockElems() != 0 {
				continue
			}
			for _, shape := range [][2]int{{16, 16}, {21, 35}, {40, 7}, {33, 1}, {33, 96}} {
				n, out := shape[0], shape[1]
				nb := in / dt.BlockElems()
				wrb := dt.RowBytes(in)
				w := mustQuantize(t, dt, randVec(r, out*in))
				xrb := nb * k.actBlockBytes
				xq := make([]byte, n*xrb)
				for j := range n {
					x := randVec(r, in)
					x[r.IntN(in)] = 30 * float32(j+1)
					k.quantize(xq[j*xrb:(j+1)*xrb], x)
				}
				want := make([]float32, n*out)
				for j := range n {
					k.rows(want[j*out:(j+1)*out], w, wrb, xq[j*xrb:(j+1)*xrb], nb)
				}
				wt := &tensor{dtype: dt, raw: w}
				for _, kind := range kinds {
					t.Run(fmt.Sprintf("%v/in%d/n%d/out%d/%s", dt, in, n, out, kind.name), func(t *testing.T) {
						var p amxPlan
						p.dot = kind.dot
						p.size(amxFormats[dt], n, in, 1)
						p.pack(xq, xrb, k.actBlockBytes, 0, n)
						// dst is one row wider than n·out reads; the extra cells must stay NaN.
						dst := make([]float32, n*out+out)
						for i := range dst {
							dst[i] = float32(math.NaN())
						}
						// Two ranges, as two threads' chunks would split the rows.
						mid := min(out, 16)
						p.run(dst[:n*out], out, wt, 0, mid)
						p.run(dst[:n*out], out, wt, mid, out)
						// Block sums cancel (min terms, signed levels), so the
						// f32 error scales with the largest output, not each one.
						var mag float64
						for _, v := range want {
							mag = max(mag, math.Abs(float64(v)))
						}
						for j := range n {
							for o := range out {
								got, exp := dst[j*out+o], want[j*out+o]
								if d := math.Abs(float64(got - exp)); !(d <= 2e-5*mag) {
									t.Fatalf("activation %d row %d: tiled %v, rows %v (diff %g, largest output %g)", j, o, got, exp, d, mag)
								}
							}
						}
						for i := n * out; i < len(dst); i++ {
							if !math.IsNaN(float64(dst[i])) {
								t.Fatalf("wrote %v past the product at %d", dst[i], i)
							}
						}
					})
				}
			}
		}
	}
}

// TestAMXUnpackLevels checks each unpacker's levels and scales against the
// weight type's dequantizer: level·scale (+ min) must give the dequantized
// weight.
func TestAMXUnpackLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for dt, f := range amxFormats {
		in, rows := 512, 5
		nb := in / dt.BlockElems()
		wrb := dt.RowBytes(in)
		w := mustQuantize(t, dt, randVec(r, rows*in))
		step := 16
		if f.hasMin {
			step = 32
		}
		nsc := in / f.blockK * step
		img := levels{make([]byte, 16*in), in, make([]uint16, nsc)}
		sc := make([]float32, nsc)
		f.unpack(img, sc, step, w, wrb, rows, nb)
		if f.halfScales {
			for i, h := range img.half {
				sc[i] = quant.F16ToF32(h)
			}
		}
		for row := range rows {
			want := make([]float32, in)
			if err := quant.Dequantize(dt, w[row*wrb:(row+1)*wrb], want); err != nil {
				t.Fatal(err)
			}
			for e := range in {
				b := e / f.blockK
				lv := int8(img.lv[row*in+e])
				got := float32(lv) * sc[b*step+row]
				if f.hasMin {
					got += sc[b*step+16+row]
				}
				if d := math.Abs(float64(got - want[e])); d > 1e-6*(math.Abs(float64(want[e]))+1e-3) {
					t.Fatalf("%v row %d element %d: level %d gives %v, dequantized %v", dt, row, e, lv, got, want[e])
				}
			}
		}
	}
}

// BenchmarkAMXMatMul: a Gemma 3 270M feed-forward matmul (640 → 2048; K-quants
// 2048 wide) over a 128-row prompt chunk, tiled (where the CPU has AMX) or
// with the row kernels (SLUICE_AMX=0 in the environment).
func BenchmarkAMXMatMul(b *testing.B) {
	for _, dt := range []kernels.DType{kernels.Q5_0, kernels.Q8_0, kernels.Q4_K, kernels.Q6_K} {
		in, out, n := 640, 2048, 128
		if dt.BlockElems() == 256 {
			in = 2048
		}
		b.Run(fmt.Sprintf("%v/in%d", dt, in), func(b *testing.B) {
			r := rand.New(rand.NewPCG(35, 36))
			wt := &tensor{dtype: dt, raw: mustQuantize(b, dt, randVec(r, out*in))}
			x := randVec(r, n*in)
			dst := make([]float32, n*out)
			w := newWorkers(1)
			defer w.close()
			prompt := make([]bool, n)
			for i := range prompt {
				prompt[i] = true
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				matMulPrompt(&w, dst, x, n, in, wt, out, nil, prompt)
			}
			macs := float64(n*in*out) * float64(b.N)
			b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
			b.ReportMetric(macs/(processCPU()-cpu0)/1e9, "GMAC/cpu-s")
		})
	}
}

// BenchmarkAMXTileKernel times amxDotTiles alone (no unpack, no packing):
// one 16-row weight tile of 640 elements against 8 groups of 16 rows.
func BenchmarkAMXTileKernel(b *testing.B) {
	if !useAMX {
		b.Skip("no AMX")
	}
	r := rand.New(rand.NewPCG(37, 38))
	dt, in, n, out := kernels.Q5_0, 640, 128, 16
	k := quantKernels[dt]
	nb := in / 32
	xrb := nb * k.actBlockBytes
	xq := make([]byte, n*xrb)
	for j := range n {
		k.quantize(xq[j*xrb:(j+1)*xrb], randVec(r, in))
	}
	w := mustQuantize(b, dt, randVec(r, out*in))
	var p amxPlan
	p.size(amxFormats[dt], n, in, 1)
	p.pack(xq, xrb, k.actBlockBytes, 0, n)
	p.dot = func(c *amxCall) {
		cpu0 := processCPU()
		b.ResetTimer()
		for range b.N {
			amxDotTiles(c)
		}
		steps := float64(b.N * c.groups * c.nbk)
		b.ReportMetric(b.Elapsed().Seconds()*1e9/steps, "ns/block")
		b.ReportMetric((processCPU()-cpu0)*1e9/steps, "cpu-ns/block")
	}
	dst := make([]float32, n*out)
	p.run(dst, out, &tensor{dtype: dt, raw: w}, 0, out)
}

// TestMatMulPromptRows: in a batch that mixes prompt rows (tiled) with
// generated ones (row kernels), every row gets the bits it gets alone —
// a prompt row as a batch of one prompt row, a generated row from matMul —
// so a row's kernel depends on the row alone (design invariant 6).
func TestMatMulPromptRows(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	const in, out, n = 512, 40, 37
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0, kernels.Q5_0, kernels.Q4_K, kernels.Q6_K} {
		t.Run(dt.String(), func(t *testing.T) {
			wt, _ := weightTensor(t, r, dt, out, in)
			x := randVec(r, n*in)
			prompt := make([]bool, n)
			for i := range prompt {
				prompt[i] = i < 20 || i%3 == 0 // a long prefill, then a mix
			}
			batch := make([]float32, n*out)
			matMulPrompt(testWorkers(t, 3), batch, x, n, in, wt, out, nil, prompt)
			one := make([]float32, out)
			single := testWorkers(t, 1)
			for i := range n {
				matMulPrompt(single, one, x[i*in:(i+1)*in], 1, in, wt, out, nil, prompt[i:i+1])
				for o := range out {
					if one[o] != batch[i*out+o] {
						t.Fatalf("row %d (prompt %v) col %d: alone %v, in batch %v", i, prompt[i], o, one[o], batch[i*out+o])
					}
				}
			}
		})
	}
}

// TestActQ8_KAVX512: the assembly Q8_K quantizer gives quant.ActQ8_K's
// bytes: random rows with outliers, a block whose largest magnitude occurs
// twice with both signs (the first wins), negative maxima, zero blocks.
func TestActQ8_KAVX512(t *testing.T) {
	k := quantKernels[kernels.Q4_K]
	r := rand.New(rand.NewPCG(41, 42))
	for trial := range 200 {
		nb := 1 + trial%5
		x := randVec(r, nb*256)
		switch trial % 4 {
		case 1:
			x[r.IntN(len(x))] = -50
		case 2:
			x[3], x[200] = 9, -9 // ties: the first decides the sign
		case 3:
			clear(x[:256]) // an all-zero block
		}
		got := make([]byte, nb*quant.Q8_KBlockBytes)
		want := make([]byte, len(got))
		for i := range got {
			got[i] = 0xa5 // every byte must be written
		}
		k.quantize(got, x)
		quant.ActQ8_K(want, x)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("trial %d: byte %d (block %d, offset %d): %#x, want %#x", trial, i, i/quant.Q8_KBlockBytes, i%quant.Q8_KBlockBytes, got[i], want[i])
			}
		}
	}
}

// TestAMXUnpackQ5_0Fast: the assembly Q5_0 unpacker writes the Go one's
// levels and scale bits, and nothing past its rows.
func TestAMXUnpackQ5_0Fast(t *testing.T) {
	if !useAMX {
		t.Skip("no AMX: the Go unpacker is the only one")
	}
	r := rand.New(rand.NewPCG(43, 44))
	for _, rows := range []int{1, 5, 16} {
		in := 640
		nb := in / 32
		wrb := kernels.Q5_0.RowBytes(in)
		w := mustQuantize(t, kernels.Q5_0, randVec(r, rows*in))
		stride := in + 64
		a := levels{make([]byte, 16*stride), stride, make([]uint16, nb*16)}
		b := levels{make([]byte, 16*stride), stride, make([]uint16, nb*16)}
		for i := range a.lv {
			a.lv[i], b.lv[i] = 0x5a, 0x5a
		}
		unpackQ5_0(a, nil, 16, w, wrb, rows, nb)
		amxFormats[kernels.Q5_0].unpack(b, nil, 16, w, wrb, rows, nb)
		if !slices.Equal(a.lv, b.lv) || !slices.Equal(a.half, b.half) {
			t.Fatalf("rows %d: the assembly's levels or scales differ from the Go unpacker's", rows)
		}
	}
}

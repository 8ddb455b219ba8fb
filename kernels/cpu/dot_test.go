package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

var quantTypes = []kernels.DType{
	kernels.Q4_0, kernels.Q4_1, kernels.Q5_0, kernels.Q5_1, kernels.Q8_0,
	kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.MXFP4, kernels.Q8_K,
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func mustQuantize(t testing.TB, dt kernels.DType, x []float32) []byte {
	t.Helper()
	q, err := quant.Quantize(dt, x)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func mustDequantize(t testing.TB, dt kernels.DType, q []byte, n int) []float32 {
	t.Helper()
	y := make([]float32, n)
	if err := quant.Dequantize(dt, q, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// decodeAct turns a quantized activation row back into floats. Q8_1 is not a
// storage DType, so it is decoded here: x = d·q.
func decodeAct(t testing.TB, dt kernels.DType, xq []byte, n int) []float32 {
	if quantKernels[dt].actBlockBytes != quant.Q8_1BlockBytes {
		if quantKernels[dt].actBlockBytes == quant.Q8_0BlockBytes {
			return mustDequantize(t, kernels.Q8_0, xq, n)
		}
		return mustDequantize(t, kernels.Q8_K, xq, n)
	}
	y := make([]float32, n)
	for b := range n / 32 {
		blk := xq[b*36:]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range 32 {
			y[b*32+j] = d * float32(int8(blk[4+j]))
		}
	}
	return y
}

// TestDotKernels checks each integer kernel, generic and (where present)
// assembly, against a float64 dot of the dequantized weight and the
// dequantized activation. Both sides see the same quantized numbers, so the
// only difference is f32 rounding: the block sums are exact integers, and the
// per-block f32 products and the running sum each add ≤ 2⁻²⁴ relative error,
// so |error| ≤ (blocks+8)·2⁻²³·Σ|w·x|; 1e-5·Σ|w·x| covers up to ~80 blocks.
func TestDotKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range quantTypes {
		k := quantKernels[dt]
		for _, in := range []int{256, 512, 1536, 2560} {
			t.Run(fmt.Sprintf("%v/%d", dt, in), func(t *testing.T) {
				w := mustQuantize(t, dt, randVec(r, in))
				x := randVec(r, in)
				x[3] = 40 // an outlier, as real activations have
				nb := in / dt.BlockElems()
				xq := make([]byte, nb*k.actBlockBytes)
				k.quantize(xq, x)
				wf, xf := mustDequantize(t, dt, w, in), decodeAct(t, dt, xq, in)
				var want, mag float64
				for i := range in {
					want += float64(wf[i]) * float64(xf[i])
					mag += math.Abs(float64(wf[i]) * float64(xf[i]))
				}
				want += q8_1SumCorrection(dt, w, xq, nb)
				tol := 1e-5 * mag
				if got := k.generic(w, xq, nb); math.Abs(float64(got)-want) > tol {
					t.Errorf("generic: got %v, want %v (tolerance %g)", got, want, tol)
				}
				// The row kernel, over runs of 1..5 copies of the row (pairs and a
				// single left over), must give the same for each.
				wb := dt.RowBytes(in)
				for rows := 1; rows <= 5; rows++ {
					ws := bytes.Repeat(w, rows)
					dst := make([]float32, rows)
					k.rows(dst, ws, wb, xq, nb)
					for r, got := range dst {
						if math.Abs(float64(got)-want) > tol || got != dst[0] {
							t.Errorf("rows=%d row %d: got %v, want %v (tolerance %g, row 0 %v)", rows, r, got, want, tol, dst[0])
						}
					}
					if k.rows2 == nil {
						continue
					}
					// The two-activation form must match rows bit for bit.
					x2 := randVec(r, in)
					xq2 := make([]byte, len(xq))
					k.quantize(xq2, x2)
					want2 := make([]float32, rows)
					k.rows(want2, ws, wb, xq2, nb)
					d0, d1 := make([]float32, rows), make([]float32, rows)
					k.rows2(d0, d1, ws, wb, xq, xq2, nb)
					for i := range rows {
						if d0[i] != dst[i] || d1[i] != want2[i] {
							t.Errorf("rows2, rows=%d row %d: got %v, %v; rows gives %v, %v", rows, i, d0[i], d1[i], dst[i], want2[i])
						}
					}
				}
			})
		}
	}
}

// q8_1SumCorrection: against Q8_1, ggml's kernels take a block's min term
// as m·s with s = d·Σq stored in f16, not as m·d·Σq; the reference does the same.
func q8_1SumCorrection(dt kernels.DType, w, xq []byte, nb int) float64 {
	if quantKernels[dt].actBlockBytes != quant.Q8_1BlockBytes {
		return 0
	}
	wbb := dt.BlockBytes()
	var c float64
	for b := range nb {
		m := float64(quant.F16ToF32(binary.LittleEndian.Uint16(w[b*wbb+2:])))
		blk := xq[b*36:]
		d := float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk)))
		s := float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:])))
		var sum int
		for j := range 32 {
			sum += int(int8(blk[4+j]))
		}
		c += m * (s - d*float64(sum))
	}
	return c
}

// TestDotF32 covers every tail length around the assembly's 8- and 32-wide
// steps, against float64.
func TestDotF32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 75; n++ {
		a, b := randVec(r, n), randVec(r, n+3)
		var want, mag float64
		for i := range n {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		tol := float64(n+1) * 0x1p-24 * mag
		if got := dotF32(a, b); math.Abs(float64(got)-want) > tol {
			t.Errorf("dotF32 n=%d: got %v, want %v", n, got, want)
		}
		if got := dotF32Generic(a, b); math.Abs(float64(got)-want) > tol {
			t.Errorf("dotF32Generic n=%d: got %v, want %v", n, got, want)
		}
	}
}

// TestActivationQuantizers: the matmul's activation quantizers (assembly on
// amd64) must produce the bytes of quant.ActQ8_0/ActQ8_1/ActQ8_K exactly, on
// ordinary rows, all-zero blocks, halves that are rounding ties (amax 127
// makes the scale 1) and tiny values.
func TestActivationQuantizers(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	rows := map[string][]float32{"normal": randVec(r, 1536)}
	zero := randVec(r, 512)
	clear(zero[64:128])
	rows["zero blocks"] = zero
	ties := make([]float32, 256)
	for i := range ties {
		ties[i] = float32(i%64) - 31.5
	}
	ties[0], ties[32], ties[64], ties[96] = 127, -127, 127, 127
	rows["ties"] = ties
	tiny := randVec(r, 256)
	for i := range tiny {
		tiny[i] *= 1e-30
	}
	rows["tiny"] = tiny
	refs := map[int]func([]byte, []float32){
		quant.Q8_0BlockBytes: quant.ActQ8_0,
		quant.Q8_1BlockBytes: quant.ActQ8_1,
		quant.Q8_KBlockBytes: quant.ActQ8_K,
	}
	for _, dt := range quantTypes {
		k := quantKernels[dt]
		for name, x := range rows {
			if len(x)%dt.BlockElems() != 0 {
				continue
			}
			nb := len(x) / dt.BlockElems()
			got, want := make([]byte, nb*k.actBlockBytes), make([]byte, nb*k.actBlockBytes)
			k.quantize(got, x)
			refs[k.actBlockBytes](want, x)
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Errorf("%v %s: byte %d differs: got %#02x, want %#02x", dt, name, i, got[i], want[i])
			}
		}
	}
}

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

var allWeightTypes = append([]kernels.DType{kernels.F32, kernels.F16, kernels.BF16}, quantTypes...)

// weightTensor quantizes random [out, in] weights to dt, returning the tensor
// and the weights as the kernels see them (dequantized).
func weightTensor(t testing.TB, r *rand.Rand, dt kernels.DType, out, in int) (*tensor, []float32) {
	raw := mustQuantize(t, dt, randVec(r, out*in))
	wt := &tensor{shape: []int{out, in}, dtype: dt, raw: raw}
	if dt == kernels.F32 {
		wt.f32 = bytesToF32(raw)
	}
	return wt, mustDequantize(t, dt, raw, out*in)
}

// TestMatMul compares matMul with a float64 product of the dequantized weights
// and the original (unquantized) activations.
//
// Tolerance, per output: quantized types first quantize x to 8 bits per block
// with step d = amax/127 stored in f16, so each element moves by at most
// d/2 + 127·d·2⁻¹¹ < 0.57·d, and the output by Σ_k |W[o,k]|·0.57·d_k. On top
// of that, f32 accumulation adds ≤ in·2⁻²⁴·Σ|W·x| (the float types have only
// this term).
func TestMatMul(t *testing.T) {
	shapes := []struct{ n, in, out, threads int }{
		{1, 256, 7, 1},
		{1, 512, 33, 2},
		{7, 256, 19, 3},
		{16, 512, 64, 2},
		{35, 256, 9, 2}, // more rows than one activation tile
		{3, 300, 5, 2},  // float types only: rows that are no whole number of SIMD steps
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range allWeightTypes {
		for _, sh := range shapes {
			if sh.in%dt.BlockElems() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/n%d_in%d_out%d_t%d", dt, sh.n, sh.in, sh.out, sh.threads), func(t *testing.T) {
				wt, wf := weightTensor(t, r, dt, sh.out, sh.in)
				x := randVec(r, sh.n*sh.in)
				bias := randVec(r, sh.out)
				dst := make([]float32, sh.n*sh.out)
				w := testWorkers(t, sh.threads)
				matMul(w, dst, x, sh.n, sh.in, wt, sh.out, bias)

				group := 32
				if dt.BlockElems() == 256 {
					group = 256 // Q8_K: one scale per 256 elements
				}
				for i := range sh.n {
					xs := x[i*sh.in : (i+1)*sh.in]
					for o := range sh.out {
						ws := wf[o*sh.in : (o+1)*sh.in]
						want, mag, qerr := float64(bias[o]), 0.0, 0.0
						for k := range sh.in {
							want += float64(ws[k]) * float64(xs[k])
							mag += math.Abs(float64(ws[k]) * float64(xs[k]))
						}
						if _, ok := quantKernels[dt]; ok {
							for g := 0; g < sh.in; g += group {
								var amax float64
								for _, v := range xs[g : g+group] {
									amax = max(amax, math.Abs(float64(v)))
								}
								for _, v := range ws[g : g+group] {
									qerr += math.Abs(float64(v)) * 0.57 * amax / 127
								}
							}
						}
						tol := qerr + float64(sh.in)*0x1p-24*mag
						if got := dst[i*sh.out+o]; math.Abs(float64(got)-want) > tol {
							t.Fatalf("dst[%d,%d] = %v, want %v (tolerance %g)", i, o, got, want, tol)
						}
					}
				}
			})
		}
	}
}

// TestMatMulBatchInvariant: a row's result must not depend on the other rows
// in the batch or on the thread count (design invariant: batching does not
// change answers), so a batch must equal its rows done one at a time, bit for bit.
func TestMatMulBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const in, out = 512, 37
	// n = 5, 7, 13, 15: groups of 8 and 4 with 1..3 rows left over; 40: more
	// than one activation tile.
	for _, tc := range []struct {
		dt kernels.DType
		n  int
	}{{kernels.Q4_1, 5}, {kernels.Q4_1, 7}, {kernels.Q4_1, 15}, {kernels.Q8_0, 13}, {kernels.Q8_0, 7}} {
		t.Run(fmt.Sprintf("%v/n%d", tc.dt, tc.n), func(t *testing.T) {
			batchInvariant(t, r, tc.dt, tc.n, in, out)
		})
	}
	for _, dt := range allWeightTypes {
		t.Run(dt.String(), func(t *testing.T) { batchInvariant(t, r, dt, 40, in, out) })
	}
}

// batchInvariant: n rows of x through one batched matMul must equal each row
// through matMul alone, bit for bit.
func batchInvariant(t *testing.T, r *rand.Rand, dt kernels.DType, n, in, out int) {
	wt, _ := weightTensor(t, r, dt, out, in)
	x := randVec(r, n*in)
	batch := make([]float32, n*out)
	matMul(testWorkers(t, 3), batch, x, n, in, wt, out, nil)
	one := make([]float32, out)
	single := testWorkers(t, 1)
	for i := range n {
		matMul(single, one, x[i*in:(i+1)*in], 1, in, wt, out, nil)
		for o := range out {
			if one[o] != batch[i*out+o] {
				t.Fatalf("row %d col %d: alone %v, in batch %v", i, o, one[o], batch[i*out+o])
			}
		}
	}
}

// TestMatMulNoAlloc: once its scratch has grown, matMul allocates nothing,
// single-threaded or handing chunks to the helpers.
func TestMatMulNoAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0, kernels.F16} {
		wt, _ := weightTensor(t, r, dt, 64, 576)
		x := randVec(r, 4*576)
		dst := make([]float32, 4*64)
		for _, threads := range []int{1, 2} {
			w := testWorkers(t, threads)
			if a := testing.AllocsPerRun(10, func() { matMul(w, dst, x, 4, 576, wt, 64, nil) }); a != 0 {
				t.Errorf("%v, %d threads: %v allocations per call", dt, threads, a)
			}
		}
	}
}

func TestGetRows(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const rows, cols = 5, 256
	for _, dt := range allWeightTypes {
		t.Run(dt.String(), func(t *testing.T) {
			src, want := weightTensor(t, r, dt, rows, cols)
			pick := []int32{4, 0, 4, 2}
			dst := make([]float32, len(pick)*cols)
			if err := getRows(dst, src, pick, new([]byte)); err != nil {
				t.Fatal(err)
			}
			for i, p := range pick {
				for c := range cols {
					if got, w := dst[i*cols+c], want[int(p)*cols+c]; got != w {
						t.Fatalf("row %d (src %d) col %d: got %v, want %v", i, p, c, got, w)
					}
				}
			}
		})
	}
}

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestMatMulsBitExact: the weights of a MatMuls call, run as one operation
// whose chunks span two weights (out sizes that are not multiples of the
// chunk grain), give every output what one MatMul a weight gives, bit for
// bit, for every activation-row group and padding (n up to past xTile),
// with biases on some weights, on 1 to 3 threads. Calls that cannot share
// (mixed types, prompt rows of a tiled type) fall back and agree too.
func TestMatMulsBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 7))
	const in = 768 // whole Q4_K blocks
	outs := []int{72, 24, 40}
	for _, types := range [][]kernels.DType{
		{kernels.Q4_1, kernels.Q4_1, kernels.Q4_1},
		{kernels.Q8_0, kernels.Q8_0, kernels.Q8_0},
		{kernels.Q4_K, kernels.Q4_K, kernels.Q4_K},
		{kernels.Q4_1, kernels.Q8_0, kernels.Q4_1},
		{kernels.F32, kernels.F32, kernels.F32},
	} {
		for _, threads := range []int{1, 2, 3} {
			b := New(threads)
			t.Cleanup(func() { b.Close() })
			var ws, biases []kernels.Tensor
			for i, dt := range types {
				v := randVec(r, outs[i]*in)
				data := f32Bytes(v)
				if dt != kernels.F32 {
					data = mustQuantize(t, dt, v)
				}
				w, err := b.Upload(kernels.HostTensor{Name: "w", DType: dt, Shape: []int{outs[i], in}, Data: data})
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
				var bias kernels.Tensor
				if i != 1 {
					bias = scratch(t, b, randVec(r, outs[i]), outs[i])
				}
				biases = append(biases, bias)
			}
			for _, n := range []int{1, 2, 3, 5, 7, 8, 9, 17, 33, 40} {
				for _, prompt := range []bool{false, true} {
					t.Run(fmt.Sprintf("%v/t%d/n%d/prompt=%v", types, threads, n, prompt), func(t *testing.T) {
						x := scratch(t, b, randVec(r, n*in), n, in)
						flags := make([]bool, n)
						flags[n/2] = prompt
						b.SetPromptRows(flags)
						defer b.SetPromptRows(nil)
						var shared, alone []kernels.Tensor
						for i := range ws {
							shared = append(shared, scratch(t, b, nil, n, outs[i]))
							alone = append(alone, scratch(t, b, nil, n, outs[i]))
							if err := b.MatMul(alone[i], x, ws[i], biases[i], n); err != nil {
								t.Fatal(err)
							}
						}
						if err := b.MatMuls(shared, x, ws, biases, n); err != nil {
							t.Fatal(err)
						}
						for i := range ws {
							got, want := shared[i].(*tensor).f32, alone[i].(*tensor).f32
							for j := range n * outs[i] {
								if got[j] != want[j] {
									t.Fatalf("weight %d row %d col %d: MatMuls %v, MatMul %v", i, j/outs[i], j%outs[i], got[j], want[j])
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestMatMulsNoAlloc: a shared-input call allocates nothing once its
// scratch has grown, like MatMul.
func TestMatMulsNoAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 8))
	const in = 576
	for _, threads := range []int{1, 2} {
		b := New(threads)
		t.Cleanup(func() { b.Close() })
		var ws, dsts []kernels.Tensor
		for _, out := range []int{64, 32, 32} {
			w, err := b.Upload(kernels.HostTensor{Name: "w", DType: kernels.Q4_1, Shape: []int{out, in}, Data: mustQuantize(t, kernels.Q4_1, randVec(r, out*in))})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
			dsts = append(dsts, scratch(t, b, nil, 4, out))
		}
		x := scratch(t, b, randVec(r, 4*in), 4, in)
		if a := testing.AllocsPerRun(10, func() { b.MatMuls(dsts, x, ws, nil, 4) }); a != 0 {
			t.Errorf("%d threads: %v allocations a call", threads, a)
		}
	}
}

package cpu

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// guarded returns a slice of n bytes that ends exactly where an unmapped page
// begins, so any read past it faults. Some weights are used in place in an
// mmap'd model file (MoE expert stacks, every weight after KeepFileLayout),
// so a kernel reading even one byte past the last block could crash on the
// last row of a tensor at the end of the file.
func guarded(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n/page + 2) * page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return mem[size-page-n : size-page]
}

// TestKernelsStayInBounds runs every row kernel on weight and activation rows
// that end at a guard page.
func TestKernelsStayInBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, dt := range quantTypes {
		t.Run(dt.String(), func(t *testing.T) {
			k := quantKernels[dt]
			const in, rows = 512, 3
			nb := in / dt.BlockElems()
			w := guarded(t, rows*dt.RowBytes(in))
			copy(w, mustQuantize(t, dt, randVec(r, rows*in)))
			x := guarded(t, nb*k.actBlockBytes)
			k.quantize(x, randVec(r, in))
			dst := make([]float32, rows)
			k.rows(dst, w, dt.RowBytes(in), x, nb)
			if k.rows2 != nil {
				dst2 := make([]float32, rows)
				k.rows2(dst, dst2, w, dt.RowBytes(in), x, x, nb)
			}
			for i := range rows {
				want := k.generic(w[i*dt.RowBytes(in):], x, nb)
				if d := dst[i] - want; d > 1e-3*abs(want)+1e-3 || -d > 1e-3*abs(want)+1e-3 {
					t.Fatalf("row %d: got %v, generic %v", i, dst[i], want)
				}
			}
		})
	}
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		w := guarded(t, 2*37)
		copy(w, mustQuantize(t, dt, randVec(r, 37)))
		x := randVec(r, 37)
		if got, want := dotHalf(dt, w, x), dotF32Generic(mustDequantize(t, dt, w, 37), x); abs(got-want) > 1e-4*abs(want)+1e-4 {
			t.Fatalf("%v: got %v, want %v", dt, got, want)
		}
	}
	a, b := bytesToF32(guarded(t, 4*37)), bytesToF32(guarded(t, 4*37))
	a[36], b[36] = 2, 1
	if got := dotF32(a, b); got != 2 {
		t.Fatalf("dotF32 = %v, want 2", got)
	}
}

func abs(f float32) float32 { return max(f, -f) }

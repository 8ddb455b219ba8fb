//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestSkinnyMatMul runs the 9–64-row kernels against the CPU backend at
// row counts on both sides of each variant's 16, 32 and 64, for every
// weight type, with outputs that leave the last block's warps partly or
// wholly without weight rows (out 100, 40) and k past one 256-element
// chunk (288, 512).
func TestSkinnyMatMul(t *testing.T) {
	p := newPairWith(t, Options{BLAS: "off"})
	for _, dt := range weightTypes {
		if dt == kernels.F32 {
			continue
		}
		for _, sh := range []struct{ out, in int }{{100, 288}, {40, 512}} {
			if sh.in%dt.BlockElems() != 0 {
				continue
			}
			w := p.upload(dt, p.randn(sh.out*sh.in, 0.05), sh.out, sh.in)
			bias := p.upload(kernels.F32, p.randn(sh.out, 1), sh.out)
			for _, n := range []int{9, 16, 17, 31, 33, 64} {
				x := p.scratch(p.randn(n*sh.in, 1), n, sh.in)
				dst := p.scratch(nil, n, sh.out)
				mark := len(p.gpu.step.launches)
				must(t, p.gpu.MatMul(dst.g, x.g, w.g, bias.g, n), p.cpu.MatMul(dst.c, x.c, w.c, bias.c, n))
				if got, want := p.gpu.step.launches[mark:], skinnyKernel(n, kernelSuffix[dt]); len(got) != 1 || got[0].fn != want {
					t.Errorf("MatMul %v n=%d launched %d kernels, want one %s", dt, n, len(got), want)
				}
				p.check(fmt.Sprintf("MatMul %v %dx%d n=%d", dt, sh.out, sh.in, n), dst, n*sh.out, matmulBound(dt, n))
			}
		}
	}
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestDecodeLayerFusion runs one batch-1 decoder layer's op sequence, as
// models.Llama issues it, on both backends: the CUDA backend must record it
// as the 6 launches of matmul.cu's and elementwise.cu's fused kernels (norm +
// q/k/v GEMV, rope_kv, attention, o GEMV + residual, norm + gate/up GEMV +
// SwiGLU, down GEMV + residual) and agree with the CPU on every tensor the
// fused launches still write.
func TestDecodeLayerFusion(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.BF16, kernels.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) { testDecodeLayerFusion(t, dt) })
	}
}

func testDecodeLayerFusion(t *testing.T, dt kernels.DType) {
	p := newPair(t)
	const hidden, ffn, heads, kvHeads, hd, bs = 256, 512, 4, 2, 64, 16
	qCols, kvCols := heads*hd, kvHeads*hd
	cfg := kernels.KVConfig{Layers: 1, Blocks: 8, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kvg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kvc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	w := func(out, in int) twin { return p.upload(dt, p.randn(out*in, 0.05), out, in) }
	wq, wk, wv, wo := w(qCols, hidden), w(kvCols, hidden), w(kvCols, hidden), w(hidden, qCols)
	wg, wu, wd := w(ffn, hidden), w(ffn, hidden), w(hidden, ffn)
	n1, n2 := p.upload(kernels.F32, p.randn(hidden, 1), hidden), p.upload(kernels.F32, p.randn(hidden, 1), hidden)
	freq := p.upload(kernels.F32, p.randn(hd/2, 0.1), hd/2)
	x := p.scratch(p.randn(hidden, 1), 1, hidden)
	h, o := p.scratch(nil, 1, hidden), p.scratch(nil, 1, hidden)
	q, k, v, att := p.scratch(nil, 1, qCols), p.scratch(nil, 1, kvCols), p.scratch(nil, 1, kvCols), p.scratch(nil, 1, qCols)
	gate, up := p.scratch(nil, 1, ffn), p.scratch(nil, 1, ffn)
	// a prefix of 40 positions written by an unfused prefill-sized step
	blocks := []int32{5, 2, 7, 0}
	pre := buildBatch([]seqSpec{{0, 40}}, [][]int32{blocks}, bs)
	kp, vp := p.scratch(p.randn(40*kvCols, 1), 40, kvCols), p.scratch(p.randn(40*kvCols, 1), 40, kvCols)
	qp, ap := p.scratch(p.randn(40*qCols, 1), 40, qCols), p.scratch(nil, 40, qCols)
	must(t, p.gpu.Attention(ap.g, qp.g, kp.g, vp.g, kvg, 0, pre, 0.125), p.cpu.Attention(ap.c, qp.c, kp.c, vp.c, kvc, 0, pre, 0.125))
	must(t, p.gpu.Sync())

	batch := buildBatch([]seqSpec{{40, 41}}, [][]int32{blocks}, bs)
	layer := func(be kernels.Backend, kv kernels.KVStore, get func(twin) kernels.Tensor) error {
		return firstError(
			be.RMSNorm(get(h), get(x), get(n1), 1, 1e-5),
			be.MatMul(get(q), get(h), get(wq), nil, 1),
			be.MatMul(get(k), get(h), get(wk), nil, 1),
			be.MatMul(get(v), get(h), get(wv), nil, 1),
			be.RoPE(get(q), get(freq), batch.Positions, heads, kernels.RoPEHalves),
			be.RoPE(get(k), get(freq), batch.Positions, kvHeads, kernels.RoPEHalves),
			be.Attention(get(att), get(q), get(k), get(v), kv, 0, batch, 0.125),
			be.MatMul(get(o), get(att), get(wo), nil, 1),
			be.Add(get(x), get(o), 1),
			be.RMSNorm(get(h), get(x), get(n2), 1, 1e-5),
			be.MatMul(get(gate), get(h), get(wg), nil, 1),
			be.MatMul(get(up), get(h), get(wu), nil, 1),
			be.SwiGLU(get(gate), get(gate), get(up), 1),
			be.MatMul(get(o), get(gate), get(wd), nil, 1),
			be.Add(get(x), get(o), 1),
		)
	}
	must(t, layer(p.gpu, kvg, func(t twin) kernels.Tensor { return t.g }), layer(p.cpu, kvc, func(t twin) kernels.Tensor { return t.c }))
	var fns []string
	for _, l := range p.gpu.step.launches {
		fns = append(fns, l.fn)
	}
	suffix := kernelSuffix[dt]
	want := []string{"gemv_" + suffix + "_1", "rope_kv", fmt.Sprintf("paged_decode_%d", hd), "gemv_" + suffix + "_1",
		"gemv_glu_" + suffix + "_1", "gemv_" + suffix + "_1"}
	if fmt.Sprint(fns) != fmt.Sprint(want) {
		t.Errorf("a decode layer recorded %v, want %v", fns, want)
	}
	bound := matmulBound(dt, 1)
	for _, c := range []struct {
		name string
		t    twin
		n    int
	}{{"h (the second norm, folded into gate/up)", h, hidden}, {"q (rotated)", q, qCols}, {"k (rotated)", k, kvCols}, {"attention", att, qCols}, {"gate (SwiGLU)", gate, ffn},
		{"up", up, ffn}, {"o (down)", o, hidden}, {"x (both residuals)", x, hidden}} {
		p.check(fmt.Sprintf("%v %s", dt, c.name), c.t, c.n, bound)
	}
	// the cache as rope_kv wrote it: attention over the next position reads it
	next := buildBatch([]seqSpec{{41, 42}}, [][]int32{blocks}, bs)
	q2 := p.scratch(p.randn(qCols, 1), 1, qCols)
	k2, v2 := p.scratch(p.randn(kvCols, 1), 1, kvCols), p.scratch(p.randn(kvCols, 1), 1, kvCols)
	must(t, p.gpu.Attention(att.g, q2.g, k2.g, v2.g, kvg, 0, next, 0.125), p.cpu.Attention(att.c, q2.c, k2.c, v2.c, kvc, 0, next, 0.125))
	p.check(fmt.Sprintf("%v attention over the fused step's cache", dt), att, qCols, 1e-3)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

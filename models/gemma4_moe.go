package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Gemma 4 26B-A4B (gemma4.expert_count > 0): a layer whose file has
// ffn_gate_inp runs a mixture of experts beside its dense FFN, as llama.cpp
// v0.5.0's gemma4 graph and Hugging Face's Gemma4TextDecoderLayer compute
// it. With a the residual stream after attention:
//
//	dense  = post_ffw_norm_1(GeGLU FFN(ffn_norm(a)))
//	logits = ffn_gate_inp · (rmsnorm(a) / √hidden ⊙ ffn_gate_inp.scale)
//	mix    = post_ffw_norm_2(Σ_top-k w_e · s_e · expert_e(pre_ffw_norm_2(a)))
//	a     += post_ffw_norm(dense + mix)
//
// The router reads a normed without a weight, scaled per channel; w is the
// softmax over all experts renormalised over the chosen k (llama.cpp's
// build_moe_ffn with softmax gating and norm_w); experts are GeGLU like the
// dense FFN; s_e is the router's per-expert scale, which the converter
// stores as ffn_down_exps.scale (absent: 1). The experts' gate and up come
// apart or fused (ffn_gate_up_exps, each expert's gate rows then its up
// rows, as the checkpoint's gate_up_proj is and the converter keeps it),
// which the kernel multiplies as one matrix.

// gemma4MoEOps is the mixture kernel Gemma 4 needs: MoEFFN with GeGLU
// experts and per-expert output scales (kernels/cpu/moe_gelu.go); up nil
// takes gate as the fused [experts, 2·ffn, hidden] as the file has it, so
// the experts are read where they lie, not copied apart.
type gemma4MoEOps interface {
	GeGLUMoEFFN(dst, x, logits, gate, up, down, downScale kernels.Tensor, n, k int, norm bool) error
}

// gemma4MoELayer is one layer's mixture.
type gemma4MoELayer struct {
	router                         kernels.Tensor // [experts, hidden]
	routerNorm                     kernels.Tensor // [hidden] F32: ffn_gate_inp.scale / √hidden
	preNorm2, postNorm1, postNorm2 kernels.Tensor // [hidden] F32
	gate, up, down                 kernels.Tensor // [experts, ffn, hidden] ×2, [experts, hidden, ffn]; fused: gate [experts, 2·ffn, hidden], up nil
	downScale                      kernels.Tensor // [experts] F32; nil: none
}

// gemma4MoE are a model's mixtures and their scratch.
type gemma4MoE struct {
	ops    gemma4MoEOps
	layers []*gemma4MoELayer // nil where a layer is dense
	out    kernels.Tensor    // [rows, hidden] the mixture's output
}

// loadGemma4MoE loads the mixture of every layer whose file has a router.
func (m *Llama) loadGemma4MoE(w *weightLoader) (*gemma4MoE, error) {
	c := m.cfg
	ops, ok := m.be.(gemma4MoEOps)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend lacks GeGLUMoEFFN (Gemma 4's mixture of experts, the 26B-A4B's): %w", c.Arch, m.be.Name(), ErrUnsupported)
	}
	g := &gemma4MoE{ops: ops, layers: make([]*gemma4MoELayer, c.Layers)}
	e, f, h := c.Experts, c.ExpertFFN, c.Hidden
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		if !w.src.Has(p + "ffn_gate_inp.weight") {
			continue
		}
		l := &gemma4MoELayer{}
		l.router = w.load(p+"ffn_gate_inp.weight", e, h)
		scale := w.hostF32(p+"ffn_gate_inp.scale", h)
		inv := float32(1 / math.Sqrt(float64(h)))
		for j := range scale {
			scale[j] *= inv
		}
		l.routerNorm = w.upload(f32Host(p+"ffn_gate_inp.scale/√hidden", scale))
		l.preNorm2 = w.loadF32(p+"pre_ffw_norm_2.weight", h)
		l.postNorm1 = w.loadF32(p+"post_ffw_norm_1.weight", h)
		l.postNorm2 = w.loadF32(p+"post_ffw_norm_2.weight", h)
		if w.src.Has(p + "ffn_gate_up_exps.weight") {
			l.gate = w.load(p+"ffn_gate_up_exps.weight", e, 2*f, h)
		} else {
			l.gate = w.load(p+"ffn_gate_exps.weight", e, f, h)
			l.up = w.load(p+"ffn_up_exps.weight", e, f, h)
		}
		l.down = w.load(p+"ffn_down_exps.weight", e, h, f)
		if w.src.Has(p + "ffn_down_exps.scale") {
			l.downScale = w.loadF32(p+"ffn_down_exps.scale", e)
		}
		if w.err != nil {
			return nil, w.err
		}
		g.layers[i] = l
	}
	var err error
	if g.out, err = m.be.Alloc(m.opts.MaxBatchTokens, h); err != nil {
		return nil, err
	}
	return g, nil
}

// hostF32 reads a small tensor as float32 values on the host.
func (w *weightLoader) hostF32(name string, n int) []float32 {
	t, ok := w.get(name, n)
	if !ok {
		return make([]float32, n)
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.DType, t.Data, v); err != nil {
		w.err = fmt.Errorf("%s: tensor %s: %w", w.src.Path(), name, err)
	}
	return v
}

// gemma4FFN runs layer i's feed-forward on the n rows of m.x and adds it to
// m.x: the dense GeGLU FFN, and where the layer has one the mixture beside it.
func (m *Llama) gemma4FFN(i, n int, gate, up kernels.Tensor) error {
	c, be, g, l := &m.cfg, m.be, m.gemma, &m.layers[i]
	var mix *gemma4MoELayer
	if moe := m.gemma4.moe; moe != nil {
		mix = moe.layers[i]
	}
	err := firstErr(
		be.RMSNorm(m.h, m.x, l.ffnNorm, n, c.RMSEps),
		be.MatMul(gate, m.h, l.wGate, nil, n),
		be.MatMul(up, m.h, l.wUp, nil, n),
		g.ops.GeGLU(gate, gate, up, n),
		be.MatMul(m.o, gate, l.wDown, nil, n),
	)
	if err == nil && mix != nil {
		out := m.gemma4.moe.out
		err = firstErr(
			be.RMSNorm(m.o, m.o, mix.postNorm1, n, c.RMSEps),
			be.RMSNorm(m.h, m.x, mix.routerNorm, n, c.RMSEps),
			be.MatMul(m.router, m.h, mix.router, nil, n),
			be.RMSNorm(m.h, m.x, mix.preNorm2, n, c.RMSEps),
			m.gemma4.moe.ops.GeGLUMoEFFN(out, m.h, m.router, mix.gate, mix.up, mix.down, mix.downScale, n, c.ExpertsUsed, c.ExpertNorm),
			be.RMSNorm(out, out, mix.postNorm2, n, c.RMSEps),
			be.Add(m.o, out, n),
		)
	}
	return firstErr(err,
		be.RMSNorm(m.o, m.o, l.postFFNNorm, n, c.RMSEps),
		be.Add(m.x, m.o, n),
	)
}

// gemma4MoELayout is sluice inspect's line for a Gemma 4 mixture: which
// layers have one, how the router and the branches combine, and how the
// file lays out the experts.
func gemma4MoELayout(c Config, src WeightSource) string {
	layers, fused, scaled := "every layer", false, false
	if src != nil {
		var with []bool
		for i := range c.Layers {
			with = append(with, src.Has(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)))
		}
		if slices.Contains(with, false) {
			layers = layerList(with)
		}
		fused, scaled = src.Has("blk.0.ffn_gate_up_exps.weight"), src.Has("blk.0.ffn_down_exps.scale")
	}
	layout := "gate and up apart"
	if fused {
		layout = "gate and up fused (ffn_gate_up_exps)"
	}
	scale := "none"
	if scaled {
		scale = "ffn_down_exps.scale"
	}
	return fmt.Sprintf("%s: GeGLU experts beside the dense FFN (ffn %d), each branch post-normed, summed, then post_ffw_norm; "+
		"router on rmsnorm(x)/√hidden ⊙ ffn_gate_inp.scale, softmax, top %d renormalised; per-expert output scale %s; %s",
		layers, c.FFN, c.ExpertsUsed, scale, layout)
}

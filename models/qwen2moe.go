package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// Qwen2-MoE (GGUF arch "qwen2moe") is Qwen2's attention (Q/K/V biases, NeoX
// RoPE) over a mixture whose routed weights are the softmax over all experts,
// not renormalised over the chosen k, plus one shared expert every row runs:
//
//	out = Σ_top-k p_e · expert_e(h) + sigmoid(w_g·h) · shared(h)
//
// as llama.cpp's llama_model_qwen2moe and Hugging Face's Qwen2MoeSparseMoeBlock
// compute it. The routed part is Llama's MoE path; this file adds the rest.

// sharedExpert is one layer's shared expert: a SwiGLU feed-forward and its
// one-row gate.
type sharedExpert struct {
	gate, up, down kernels.Tensor // [shFFN, hidden] ×2, [hidden, shFFN]
	inp            kernels.Tensor // [1, hidden]: w_g, the gate logit's weights
}

// moeVariant reads what Qwen2-MoE and OLMoE change in a mixture.
func (m *metaReader) moeVariant(cfg *Config) {
	// Both route by softmax, then top k, and keep the softmax weights as they
	// are (llama.cpp passes norm_w = false for both).
	cfg.ExpertNorm = false
	switch cfg.Arch {
	case "qwen2moe":
		if _, ok := m.g.meta[m.prefix+"expert_feed_forward_length"]; !ok && cfg.ExpertsUsed > 0 {
			cfg.ExpertFFN = cfg.FFN / cfg.ExpertsUsed // llama.cpp's default for a file without the key
		}
		cfg.SharedExpertFFN = m.intOr("expert_shared_feed_forward_length", cfg.FFN)
	case "olmoe":
		cfg.QKNormWhole = cfg.QKNorm
		// llama.cpp's OLMoE sizes its experts by feed_forward_length, which
		// convert_hf_to_gguf fills with the expert width, and ignores
		// expert_feed_forward_length.
		cfg.ExpertFFN = cfg.FFN
	}
}

// sharedExpert loads layer p's shared expert. The gate's weights are a vector
// in the file ([hidden]) and a one-row matrix to MatMul.
func (w *weightLoader) sharedExpert(l *llamaLayer, p string, c Config) {
	f := c.SharedExpertFFN
	l.shared.gate = w.load(p+"ffn_gate_shexp.weight", f, c.Hidden)
	l.shared.up = w.load(p+"ffn_up_shexp.weight", f, c.Hidden)
	l.shared.down = w.load(p+"ffn_down_shexp.weight", c.Hidden, f)
	t, ok := w.get(p+"ffn_gate_inp_shexp.weight", c.Hidden)
	if !ok {
		return
	}
	t.Shape = []int{1, c.Hidden}
	up, err := w.be.Upload(t)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
	}
	l.shared.inp = up
}

// sharedExpert adds the shared expert of m.h into m.o, which holds the routed
// mixture; a no-op for models without one. m.h is read for the last time by
// the up projection, so it takes the shared expert's output: the next layer
// norms into it afresh.
func (m *Llama) sharedExpert(l *llamaLayer, n int) error {
	s := &l.shared
	if s.inp == nil {
		return nil
	}
	be := m.be
	return firstErr(
		be.MatMul(m.shGate, m.h, s.inp, nil, n), // [n, 1]
		be.MatMul(m.gate, m.h, s.gate, nil, n),  // [n, shFFN]
		be.MatMul(m.up, m.h, s.up, nil, n),
		be.SwiGLU(m.gate, m.gate, m.up, n),
		be.MatMul(m.h, m.gate, s.down, nil, n), // [n, hidden]
		m.shared.GatedAdd(m.o, m.h, m.shGate, n),
	)
}

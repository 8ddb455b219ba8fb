package models

import "fmt"

// OLMoE (GGUF arch "olmoe") is a Llama block with NeoX RoPE, no biases, a
// mixture routed by softmax-then-top-k whose weights are not renormalised
// (as Qwen2-MoE's, qwen2moe.go), and QK-norm taken over each row's whole Q
// and K projections before they are split into heads: one RMSNorm over
// heads·headDim values with a weight of that length, not one per head, as
// llama.cpp's llama_model_olmoe and Hugging Face's OlmoeAttention (q_norm of
// hidden_size) compute it. The core RMSNorm does that, so OLMoE needs no
// optional kernel beyond the mixture.

// loadWholeQKNorm loads OLMoE's Q and K norms, [heads·headDim] and
// [kvHeads·headDim].
func (m *Llama) loadWholeQKNorm(w *weightLoader) error {
	c := m.cfg
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		l.qNorm = w.loadF32(p+"attn_q_norm.weight", c.Heads*c.HeadDim)
		l.kNorm = w.loadF32(p+"attn_k_norm.weight", c.KVHeads*c.HeadDim)
	}
	return w.err
}

// wholeQKNorm norms each of the n rows of m.q and m.k in place.
func (m *Llama) wholeQKNorm(l *llamaLayer, n int) error {
	return firstErr(
		m.be.RMSNorm(m.q, m.q, l.qNorm, n, m.cfg.RMSEps),
		m.be.RMSNorm(m.k, m.k, l.kNorm, n, m.cfg.RMSEps),
	)
}

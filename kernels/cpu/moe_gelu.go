package cpu

import "github.com/sluicehq/sluice/kernels"

// GeGLUMoEFFN is MoEFFN with Gemma 4's experts: h = gelu_tanh(g) ⊙ u (by
// GeGLU's F16 table, as ggml's CPU backend computes it) and each expert's
// output scaled by downScale[e] ([experts] F32; nil: unscaled), the
// per-expert scale Gemma 4's router carries (llama.cpp's ffn_down_exps.scale).
// up nil: gate is gate and up fused, [experts, 2·ffn, hidden], each expert's
// gate rows then its up rows (ffn_gate_up_exps).
func (b *Backend) GeGLUMoEFFN(dst, x, logits, gate, up, down, downScale kernels.Tensor, n, k int, norm bool) error {
	return b.moeFFN("GeGLUMoEFFN", dst, x, logits, gate, up, down, downScale, n, k, norm, gegluMoE)
}

func gegluMoE(h, g, u []float32) { gegluRow(h, g, u, geluTable()) }

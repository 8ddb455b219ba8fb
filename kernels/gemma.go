package kernels

// The operations below are optional: a model that needs them finds them by
// type assertion at load and refuses a backend that lacks them, so a
// Llama-only backend stays as small as Ops.

// HeadNormOps normalises each attention head on its own (QK-norm: Gemma 3,
// Qwen3).
type HeadNormOps interface {
	// HeadRMSNorm: for each of the first n rows of x [n, heads*len(w)], each
	// head's slice h becomes h / sqrt(mean(h²) + eps) * w, in place.
	HeadRMSNorm(x, w Tensor, n, heads int, eps float32) error
}

// GemmaOps are the kernels Gemma 3 adds to a Llama-family pass.
type GemmaOps interface {
	HeadNormOps
	// GeGLU: dst = gelu_tanh(gate) ⊙ up, for the first n rows.
	GeGLU(dst, gate, up Tensor, n int) error
	// Scale: x *= s, for the first n rows (Gemma's embeddings × √hidden).
	Scale(x Tensor, n int, s float32) error
	// SlidingAttention is Attention in which the row at position p reads only
	// the positions (p−window, p]: the window most recent keys, its own
	// included, as llama.cpp's LLAMA_SWA_TYPE_STANDARD and Hugging Face's
	// sliding_window mask do. window ≤ 0 reads the whole context.
	SlidingAttention(out, q, k, v Tensor, kv KVStore, layer int, b *Batch, scale float32, window int) error
}

// SoftCapOps are Gemma 2's logit soft-capping, v → cap·tanh(v/cap): smooth
// bounds on the attention scores and on the final logits.
type SoftCapOps interface {
	// SoftCap caps the first n rows of x in place (the final logits).
	SoftCap(x Tensor, n int, cap float32) error
	// CappedAttention is SlidingAttention with each score q·k·scale capped
	// before the softmax; cap ≤ 0 leaves the scores as they are.
	CappedAttention(out, q, k, v Tensor, kv KVStore, layer int, b *Batch, scale float32, window int, cap float32) error
}

// QueryAttentionOps attend with queries alone over K/V that another pass
// wrote: a Gemma 4 assistant drafter reads its target's cache and must
// never change it.
type QueryAttentionOps interface {
	// QueryAttention is SlidingAttention without k and v: nothing is written,
	// each row reads the positions (p−window, p] of its block table as the
	// store holds them.
	QueryAttention(out, q Tensor, kv KVStore, layer int, b *Batch, scale float32, window int) error
}

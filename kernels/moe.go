package kernels

// MoEOps run a mixture-of-experts feed-forward (Qwen3-MoE, Mixtral). Optional,
// like GemmaOps: a model with experts refuses a backend without it.
type MoEOps interface {
	// MoEFFN: for each of the first n rows of x [n, hidden], given its router
	// logits [n, experts]: p = softmax(logits); the row's experts are the k
	// largest p (a tie goes to the lower expert), weighted by p, or by p
	// renormalised over the k when norm is set (equivalently, Mixtral's
	// softmax over the top-k logits); then
	//
	//	dst[i] = Σ_e weight_e · down_e(silu(gate_e·x[i]) ⊙ up_e·x[i])
	//
	// with gate, up [experts, ffn, hidden] and down [experts, hidden, ffn].
	// The rows routed to one expert are multiplied together, so each expert's
	// weights are read once per call however many rows chose it.
	MoEFFN(dst, x, logits, gate, up, down Tensor, n, k int, norm bool) error
}

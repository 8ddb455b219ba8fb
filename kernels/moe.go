package kernels

// MoEOps run a mixture-of-experts feed-forward (Qwen3-MoE, Mixtral, Qwen2-MoE,
// OLMoE). Optional,
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

// SharedExpertOps add a shared expert's output to a mixture (Qwen2-MoE):
// optional, and refused at load by a backend without it.
type SharedExpertOps interface {
	// GatedAdd: dst[i,:] += sigmoid(gate[i,0]) · x[i,:], for the first n
	// rows; gate is [rows, 1], each row's own gate logit.
	GatedAdd(dst, x, gate Tensor, n int) error
}

package kernels

// Gated DeltaNet (Qwen3.5/3.6, Qwen3-Next): linear-attention layers whose
// memory is a fixed-size recurrent state per sequence instead of KV that
// grows with it. The state lives in a StateStore the backend owns, indexed
// by the slot kvcache hands each running sequence (SeqRows.State), beside
// the KV blocks of the model's full-attention layers.

// StateConfig sizes a recurrent-state store: Slots slots, each holding, for
// each of Layers recurrent layers, Conv float32 values of the short
// convolution's window and SSM float32 values of the DeltaNet state.
type StateConfig struct {
	Layers int
	Slots  int
	Conv   int // (Kernel−1) · channels: the last Kernel−1 inputs of every channel
	SSM    int // VHeads · HeadDim · HeadDim
}

// SlotBytes is one slot's memory over every layer: what one running
// sequence of a hybrid model holds beside its KV blocks.
func (c StateConfig) SlotBytes() int64 { return 4 * int64(c.Layers) * int64(c.Conv+c.SSM) }

// StateStore is the memory behind the recurrent-state slots.
type StateStore interface {
	Config() StateConfig
}

// StateRollBack is implemented by a StateStore that can take a speculating
// sequence's state back to a verified row. For each sequence of the latest
// DeltaNet step with Drafts > 0 the store keeps what it needs to give the
// state after any of its rows End−1−Drafts … End−1 (its verified row and
// each draft); RollBack(slot, kept) puts the one after kept drafts (0 ≤
// kept ≤ Drafts, kept = Drafts a no-op) in the sequence's slot State =
// slot, every layer, once. What it keeps is good until the next DeltaNet
// step.
type StateRollBack interface {
	RollBack(slot int32, kept int) error
}

// DeltaNetShape is a Gated DeltaNet layer's geometry. Value head h reads
// key head h mod KHeads (llama.cpp's tiling of the key heads).
type DeltaNetShape struct {
	KHeads, VHeads int
	HeadDim        int // key and value head size (equal)
	Kernel         int // the causal convolution's width
	Eps            float32
}

// Channels is the width of the convolved projection: q | k | v.
func (s DeltaNetShape) Channels() int { return (2*s.KHeads + s.VHeads) * s.HeadDim }

// DeltaNetWeights are a layer's small tensors, all F32.
type DeltaNetWeights struct {
	Conv   Tensor // [Channels, Kernel]: depthwise causal convolution, newest input last
	DtBias Tensor // [VHeads]
	A      Tensor // [VHeads]: the decay rate −exp(A_log)
	Norm   Tensor // [HeadDim]: the gated RMSNorm's gain
}

// DeltaNetOps is the optional interface a backend implements to run hybrid
// models; Load refuses a backend without it.
type DeltaNetOps interface {
	// NewStateStore allocates the recurrent-state slots.
	NewStateStore(cfg StateConfig) (StateStore, error)
	// CopyState copies slot src's state, every layer, to slot dst (forks).
	CopyState(st StateStore, dst, src int32) error
	// DeltaNet runs the recurrent core of recurrent layer `layer` over b:
	// qkv [n, Channels] is the in-projection (overwritten), z [n, VHeads·HeadDim]
	// the output gate's projection, beta and alpha [n, VHeads] the write
	// strength and decay logits. For each sequence, in row order:
	//
	//	x      = silu(conv(window, qkv_t))             window: the last Kernel−1 inputs
	//	q, k   = l2norm per head;  β = sigmoid(beta_t);  g = softplus(alpha_t + DtBias)·A
	//	S      = S·exp(g);  S += k ⊗ β(v − Sᵀk);  o = Sᵀq / √HeadDim
	//	out_t  = rmsnorm(o)·Norm·silu(z_t)             per value head
	//
	// starting from slot b.Seqs[i].State (b.Seqs[i].Seed when Seeded), or
	// from zeros when the sequence's first row is at position 0, and leaving
	// slot State after its last row;
	// the state at b.Seqs[i].CheckpointAt, when this step reaches it, is
	// copied to slot b.Seqs[i].Checkpoint on the way.
	DeltaNet(out, qkv, z, beta, alpha Tensor, w DeltaNetWeights, sh DeltaNetShape, st StateStore, layer int, b *Batch) error
	// SigmoidMul: dst *= sigmoid(gate), for the first n rows (the gated
	// attention output of the hybrid models' full-attention layers).
	SigmoidMul(dst, gate Tensor, n int) error
}

package kernels

// Tensor is a handle to memory a Backend owns. Shapes are row-major
// [rows, cols] (or [cols] for vectors): a linear layer's weight is [out, in]
// and each of its rows is stored in the tensor's DType, block by block.
type Tensor interface {
	Shape() []int
	DType() DType
}

// HostTensor is a tensor as it lies in a model file (typically a slice of an
// mmap'd file): Data holds rows of Shape[len-1] elements in DType's layout.
type HostTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// KVConfig sizes a KV block pool: per layer, Blocks blocks of BlockSize token
// slots, each slot holding KVHeads*HeadDim values of K and of V.
//
//	slot = blockID*BlockSize + position%BlockSize
type KVConfig struct {
	Layers    int
	Blocks    int
	BlockSize int
	KVHeads   int
	HeadDim   int
}

// KVStore is the storage behind the KV block pool. It belongs to the backend;
// kvcache hands out the block ids that index it.
type KVStore interface {
	Config() KVConfig
}

// SeqRows is one sequence's share of a Batch.
type SeqRows struct {
	Start, End int // the sequence's rows in the batch: [Start, End), consecutive positions
	ContextLen int // tokens in the cache once this step has written its rows (= last position + 1)
	// Prompt is the length of the request's prompt: rows at positions below
	// it are prompt tokens, the rest generated ones (decoded, or recomputed
	// after preemption or resume). See PromptRows.
	Prompt int
	Blocks []int32 // block table: Blocks[p/BlockSize] holds position p
	// WindowBlocks is the table of the sliding-window layers' own KV store
	// (kvcache's window group), −1 for blocks no window row reads any more;
	// nil when those layers share Blocks.
	WindowBlocks []int32
	// State is the sequence's slot in a hybrid model's recurrent-state store
	// (kvcache's state slots, deltanet.go); unused by attention-only models.
	State int32
	// CheckpointAt, when above 0 and within [first position, ContextLen],
	// asks for a copy of the state as it stands at that position (every
	// position before it read) in slot Checkpoint: what a fork resumes from.
	CheckpointAt int32
	Checkpoint   int32
	// Seeded: the sequence's first row reads its state from slot Seed (the
	// cached state of a prefix-cache hit) instead of its own slot; it is
	// written to its own, as always.
	Seeded bool
	Seed   int32
	// Drafts is how many of the sequence's last rows are draft tokens that
	// verification may reject (speculative decoding). A recurrent-state
	// store that implements StateRollBack keeps the state after each row
	// before them aside for the step, so that the state after a verified
	// prefix can be put back in slot State; the other layers ignore it.
	Drafts int
}

// Batch is one step's work: every scheduled token of every sequence, one row
// each. Rows of one sequence are contiguous and in position order.
type Batch struct {
	Tokens    []int32 // [n] token id of each row
	Positions []int32 // [n] position of each row within its sequence
	Slots     []int32 // [n] KV slot each row's K and V are written to
	// WindowSlots are the rows' slots in the window layers' own KV store; nil
	// when those layers share the global store.
	WindowSlots []int32
	Seqs        []SeqRows
	LogitRows   []int32 // rows whose logits the caller needs, in output order
}

// RoPEStyle says which elements of a head are rotated together.
type RoPEStyle int

const (
	// RoPEInterleaved rotates pairs (2i, 2i+1): GGUF llama weights are permuted for it.
	RoPEInterleaved RoPEStyle = iota
	// RoPEHalves rotates pairs (i, i+d/2): Hugging Face checkpoints and GGUF qwen2.
	RoPEHalves
)

// PromptRows is implemented by a backend whose fastest kernels for prompt
// tokens compute in another order than those for generated tokens (the CPU
// backend's AMX tiles). The model flags each batch row (true: a prompt
// token, as SeqRows.Prompt says) before its layers and clears the flags
// (nil) before the logits; a MatMul over the batch's rows then picks each
// row's kernel by its flag alone, so a row's result does not depend on the
// rows beside it.
type PromptRows interface {
	SetPromptRows(prompt []bool)
}

// SharedInput is implemented by a backend that runs several MatMuls of one
// input as one operation. Decoding a small model is hundreds of MatMuls of
// tens of microseconds a step; on the CPU each is a hand-off to the other
// threads and a wait for the last of them, and each starts its weight
// stream cold, so a layer's Q, K and V (or gate and up) as one operation
// read their bytes faster than three (issue 26). Every output row is the
// one MatMul would give, bit for bit.
type SharedInput interface {
	// MatMuls is MatMul(dsts[i], x, ws[i], biases[i], n) for every i.
	// biases may be nil (no bias anywhere) or hold nil entries.
	MatMuls(dsts []Tensor, x Tensor, ws, biases []Tensor, n int) error
}

// MatMuls is be's SharedInput.MatMuls where it has one, and one MatMul a
// weight otherwise.
func MatMuls(be Ops, dsts []Tensor, x Tensor, ws, biases []Tensor, n int) error {
	if s, ok := be.(SharedInput); ok {
		return s.MatMuls(dsts, x, ws, biases, n)
	}
	for i := range ws {
		var bias Tensor
		if biases != nil {
			bias = biases[i]
		}
		if err := be.MatMul(dsts[i], x, ws[i], bias, n); err != nil {
			return err
		}
	}
	return nil
}

// Backend allocates and moves memory. Its operations come through Ops.
type Backend interface {
	Ops
	// Name identifies the backend in logs ("cpu", "cuda").
	Name() string
	// Upload makes a weight usable by the kernels. The CPU backend may keep
	// referring to t.Data (an mmap); a GPU backend copies it to the device.
	Upload(t HostTensor) (Tensor, error)
	// Alloc returns an F32 scratch tensor of the given shape.
	Alloc(shape ...int) (Tensor, error)
	// NewKVStore allocates the KV block pool's storage.
	NewKVStore(cfg KVConfig) (KVStore, error)
	// Read waits for queued work and copies t's first len(dst) F32 values to dst.
	Read(t Tensor, dst []float32) error
	// Close releases everything the backend allocated.
	Close() error
}

// Ops are the kernels a Llama-family forward pass is made of. Activations are
// F32 [rows, cols]; only the first n rows of a scratch tensor are touched.
// Weights may be any DType the backend supports.
type Ops interface {
	// GetRows: dst[i,:] = src[rows[i],:], dequantized. Embedding lookup, and
	// picking the rows whose logits are wanted.
	GetRows(dst, src Tensor, rows []int32) error
	// RMSNorm: dst[i,:] = x[i,:] / sqrt(mean(x[i,:]²) + eps) * w, for i < n.
	RMSNorm(dst, x, w Tensor, n int, eps float32) error
	// MatMul: dst[i,o] = Σ_k x[i,k]·w[o,k] (+ bias[o] when bias is non-nil), for i < n.
	MatMul(dst, x, w, bias Tensor, n int) error
	// RoPE rotates, in place, each head of x[n, heads*headDim] at positions pos;
	// invFreq [headDim/2] holds each pair's angular frequency (scaling applied).
	RoPE(x, invFreq Tensor, pos []int32, heads int, style RoPEStyle) error
	// Attention writes k and v ([n, kvHeads*headDim]) into layer's cache at
	// b.Slots, then for each sequence computes causal softmax(q·Kᵀ·scale)·V over
	// its block table into out [n, heads*headDim] (grouped-query: query head h
	// reads kv head h/(heads/kvHeads)).
	Attention(out, q, k, v Tensor, kv KVStore, layer int, b *Batch, scale float32) error
	// SwiGLU: dst = silu(gate) ⊙ up, for the first n rows.
	SwiGLU(dst, gate, up Tensor, n int) error
	// Add: dst += x, for the first n rows.
	Add(dst, x Tensor, n int) error
}

func (s RoPEStyle) String() string {
	if s == RoPEHalves {
		return "halves"
	}
	return "interleaved"
}

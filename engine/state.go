package engine

// RecurrentModel is a Model with per-sequence recurrent state beside its
// KV (hybrid models: Qwen3.5's Gated DeltaNet layers). The engine's pool
// hands each running sequence one of the model's StateSlots with its first
// blocks and takes it back when the blocks go (finish, abort, preemption),
// and each step's batch names the slot (kernels.SeqRows.State). The
// model's state is valid only for positions a sequence computed in order
// from 0, so the pool does no prefix caching for such a model and the
// choices of a group compute their prompt themselves (kvcache state.go).
type RecurrentModel interface {
	Model
	StateSlots() int
	StateSlotBytes() int64 // one slot's memory, every recurrent layer
}

// stateSlots is the pool's slot count for m: 0 for a model without state.
func stateSlots(m Model) (slots int, bytes int64) {
	if r, ok := m.(RecurrentModel); ok {
		return r.StateSlots(), r.StateSlotBytes()
	}
	return 0, 0
}

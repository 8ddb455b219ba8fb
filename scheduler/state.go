package scheduler

// StateSlot is the sequence's recurrent-state slot in a hybrid model's pool
// (kvcache state.go), −1 while it holds none: the engine puts it in each
// step's batch (kernels.SeqRows.State).
func (q *Seq) StateSlot() int32 { return q.table.StateSlot() }

package scheduler

// StateSlot is the sequence's recurrent-state slot in a hybrid model's pool
// (kvcache state.go), −1 while it holds none: the engine puts it in each
// step's batch (kernels.SeqRows.State).
func (q *Seq) StateSlot() int32 { return q.table.StateSlot() }

// Checkpoint is q's checkpoint state slot (−1: none), its position, and
// whether the state there was written (kvcache Table.Checkpoint).
func (q *Seq) Checkpoint() (slot int32, at int, written bool) { return q.table.Checkpoint() }

// TakeCheckpoint gives running q a second state slot in which to keep its
// state at position at, for its forks (kvcache Pool.TakeCheckpoint).
func (s *Scheduler) TakeCheckpoint(q *Seq, at int) bool {
	return q.state == StateRunning && s.pool.TakeCheckpoint(&q.table, at)
}

// CheckpointWritten records that the model wrote q's checkpoint.
func (s *Scheduler) CheckpointWritten(q *Seq) { s.pool.CheckpointWritten(&q.table) }

// ReleaseCheckpoint returns q's checkpoint slot to the pool.
func (s *Scheduler) ReleaseCheckpoint(q *Seq) { s.pool.ReleaseCheckpoint(&q.table) }

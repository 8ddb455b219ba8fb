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

// Seed is the slot of the cached state q's first step starts from (a
// prefix-cache hit on a hybrid model), −1 when none.
func (q *Seq) Seed() int32 { return q.table.Seed() }

// Seeded records that q's first step has read its seed.
func (s *Scheduler) Seeded(q *Seq) { s.pool.Seeded(&q.table) }

// CacheCheckpoint keeps q's written checkpoint as a cached state for the
// prefix cache, or returns its slot (kvcache Pool.CacheCheckpoint).
func (s *Scheduler) CacheCheckpoint(q *Seq) { s.pool.CacheCheckpoint(&q.table) }

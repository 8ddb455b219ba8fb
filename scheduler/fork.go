package scheduler

import "slices"

// Fork admits child, a new sequence whose tokens begin with the same tokens
// as running sequence parent's (the n choices of one prompt), straight into
// the running queue with parent's precedence: its table is a copy-on-write
// fork of parent's (kvcache.Pool.Fork) over their common computed prefix,
// less one token, so the child computes only its last partial block, at
// most BlockSize tokens, whose logits give it its own next token. It
// returns false, changing nothing, when parent is not running, child is not
// new, of another Salt (a fork shares blocks) or the running queue is full;
// the caller then Adds child, which is admitted in turn and recomputes its
// prompt (or finds it in the prefix cache).
func (s *Scheduler) Fork(child, parent *Seq) bool {
	if parent.state != StateRunning || child.state != StateNew || child.Salt != parent.Salt ||
		len(child.Tokens) == 0 || len(s.running) >= s.cfg.MaxSeqs {
		return false
	}
	child.table.SetSalt(child.Salt)
	n := min(parent.computed, len(child.Tokens)-1)
	for i := range n {
		if child.Tokens[i] != parent.Tokens[i] {
			n = i
			break
		}
	}
	shared, ok := s.pool.Fork(&child.table, &parent.table, n)
	if !ok {
		return false
	}
	s.nextID++
	child.id = s.nextID
	child.key = parent.key
	child.state = StateRunning
	child.computed = shared
	child.admitted = true
	child.cachedTokens = shared
	s.stats.Admissions++
	s.onAdmit(child)
	i, _ := slices.BinarySearchFunc(s.running, child, cmpRunning)
	s.running = slices.Insert(s.running, i, child)
	return true
}

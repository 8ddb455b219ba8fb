package kvevents

import (
	"encoding/binary"
	"slices"

	"github.com/go-zeromq/zmq4"

	"github.com/sluicehq/sluice/kvcache"
)

// A sequence reset keeps the replay socket able to rebuild an index from 0
// for the replica's whole life. When the next batch would push the oldest
// out of the replay buffer, the sender instead starts the sequence over:
// the batches from 0 on are AllBlocksCleared followed by a BlockStored for
// every block the pool holds (its state as the events told it, parents
// first), the buffer holds only those, and the stream goes on from there.
// A live subscriber sees AllBlocksCleared and the whole state (without
// replay, this is how an indexer that restarted relearns old blocks); llm-d's
// indexer, with replay, sees the sequence go back, drops the pod's entries
// and replays from 0 (pkg/kvevents/zmq_subscriber.go: "Detected event
// sequence reset"). When the state itself would fill more than half the
// buffer, the sender keeps the buffer as a window instead (the oldest
// batches go, and a replay from 0 fails as vLLM's does).

// blockKey is a block in the pool's state: its group and hash.
type blockKey struct {
	group kvcache.Group
	hash  uint64
}

// blockState is what the pool holds, as its events told it, with each
// block's store order. The sender alone uses it.
type blockState struct {
	blocks map[blockKey]storedBlock
	next   uint64
	tokens int // token ids held, a lower bound on the state's encoded bytes
	// backoff is how many more full-buffer batches go by before the next
	// try after a state too big to reset with: encoding it is not free.
	backoff int
}

type storedBlock struct {
	ev    event
	order uint64
}

func newBlockState() *blockState { return &blockState{blocks: map[blockKey]storedBlock{}} }

func (s *blockState) apply(batch []event) {
	for _, ev := range batch {
		switch ev.kind {
		case stored:
			k := blockKey{ev.group, ev.hash}
			if _, ok := s.blocks[k]; !ok {
				s.blocks[k] = storedBlock{ev, s.next}
				s.next++
				s.tokens += len(ev.tokens)
			}
		case removed:
			k := blockKey{ev.group, ev.hash}
			if b, ok := s.blocks[k]; ok {
				s.tokens -= len(b.ev.tokens)
				delete(s.blocks, k)
			}
		case cleared:
			clear(s.blocks)
			s.tokens = 0
		}
	}
}

// snapshot is AllBlocksCleared and then every held block in store order,
// except that a block's parent, when held, always comes before it (a parent
// evicted and stored again after its child would otherwise follow it, and
// an indexer skips a block whose parent it does not know).
func (s *blockState) snapshot() []event {
	order := make([]blockKey, 0, len(s.blocks))
	for k := range s.blocks {
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b blockKey) int {
		oa, ob := s.blocks[a].order, s.blocks[b].order
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return 0
	})
	out := make([]event, 0, len(order)+1)
	out = append(out, event{kind: cleared})
	done := make(map[blockKey]bool, len(order))
	var chain []blockKey
	for _, k := range order {
		// The not yet emitted ancestors held, nearest first; a cycle cannot
		// occur (a hash chains from its parent's), but done guards anyway.
		chain = chain[:0]
		for c := k; !done[c]; {
			b, ok := s.blocks[c]
			if !ok {
				break
			}
			done[c] = true
			chain = append(chain, c)
			if b.ev.parent == 0 {
				break
			}
			c = blockKey{c.group, b.ev.parent}
		}
		for i := len(chain) - 1; i >= 0; i-- {
			out = append(out, s.blocks[chain[i]].ev)
		}
	}
	return out
}

// full reports whether adding a payload of n bytes would evict the ring's
// oldest batch.
func (r *ring) full(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items) > 0 && (len(r.items)+1 > r.maxItems || r.bytes+n > r.maxBytes)
}

// restart empties the ring, which then starts at whatever is added next.
func (r *ring) restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.items)
	r.items, r.bytes, r.first = r.items[:0], 0, 0
}

// resetSequence sends the state as batches 0, 1, ... and makes them the
// replay buffer's whole content. It returns the next sequence number, or
// false (nothing sent) when the state would take more than half the
// buffer.
func (p *Publisher) resetSequence() (uint64, bool) {
	st := p.state
	if st.backoff > 0 {
		st.backoff--
		return 0, false
	}
	fail := func() (uint64, bool) {
		st.backoff = p.cfg.BufferSteps / 4
		return 0, false
	}
	// Cheap bounds first: the batches the blocks need, a byte per token.
	if 2*((len(st.blocks)+p.cfg.MaxBatch)/p.cfg.MaxBatch) > p.cfg.BufferSteps || 2*st.tokens > p.cfg.BufferBytes {
		return fail()
	}
	var payloads [][]byte
	bytes := 0
	for b := range slices.Chunk(st.snapshot(), p.cfg.MaxBatch) {
		payload, err := encodeBatch(p.cfg.Now(), b, p.cfg.BlockSize, p.cfg.Medium)
		if err != nil {
			return fail()
		}
		payloads = append(payloads, payload)
		bytes += len(payload)
		if 2*len(payloads) > p.cfg.BufferSteps || 2*bytes > p.cfg.BufferBytes {
			return fail()
		}
	}
	p.replay.ring.restart()
	for seq, payload := range payloads {
		// A subscriber that misses one (its queue full) sees a gap, which
		// llm-d's indexer fills by replay, as after any lost batch.
		_ = p.sock.SendMulti(zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, uint64(seq)), payload))
		p.replay.ring.add(uint64(seq), payload)
		p.sent.Add(1)
	}
	p.resets.Add(1)
	return uint64(len(payloads)), true
}

// Package kvcache owns the KV block pool's bookkeeping: which block ids are
// free, in use or cached, each sequence's block table, reference counts and
// the prefix-cache index. It knows only block ids; the memory they index
// belongs to the backend (kernels.KVStore).
//
// Layout: a sequence's tokens live in fixed-size blocks. Position p is in
// table block p/BlockSize, at slot block*BlockSize + p%BlockSize of the store.
//
//	positions  0 … 15 | 16 … 31 | 32 … 40
//	table      [   7  ,    2    ,    9   ]   (BlockSize 16)
//	slot(35) = 9*16 + 35%16 = 147
//
// Every block is in exactly one state:
//
//	used    ref > 0: held by one or more tables (shared prefix blocks have ref > 1)
//	cached  ref = 0, its KV is complete and indexed by hash: reusable by a
//	        later sequence with the same prefix, evicted LRU when a fresh
//	        block is needed
//	free    ref = 0, not indexed
//
// free + used + cached = total at all times. Free and cached blocks share one
// intrusive doubly linked list (O(1) take from the middle when a cached block
// is shared again); fresh blocks come from its head, freed unindexed blocks go
// to its head (reused first), freed indexed blocks to its tail (evicted last).
//
// Prefix caching: a full block is identified by the chained hash of (parent
// block's hash, its token ids). A block enters the index only once its KV has
// been computed (Commit), never when it is merely allocated. A salt
// (Table.SetSalt, LookupSalted; salt.go) seeds a chain in place of the first
// block's parent, partitioning the cache: tables of different salts never
// share a block, so a hit reveals nothing across salts.
//
// Forks (Fork, fork.go): the n choices of one prompt share its full blocks,
// one reference per table; each writes its own blocks from the first partial
// one on, so no block is written while another table reads it.
//
// Recurrent-state slots (state.go, statecache.go): a hybrid model's
// per-sequence state (Qwen3.5's Gated DeltaNet layers) lives in slots the
// pool hands out with a table's first blocks and takes back with its last;
// checkpoints of it at block boundaries serve forks and, as cached states,
// prefix hits, which stop at the deepest block a cached state ends.
//
//	slots = free + held by tables (state, checkpoint) + cached
//
// Concurrency: none. The engine loop is the only owner; nothing here locks.
package kvcache

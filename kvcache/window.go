package kvcache

import "fmt"

// Sliding-window layers (Gemma 3's five of every six) read only the last W
// positions, so the KV they keep beyond that is dead weight. A pool made
// with a Window keeps those layers in a block group of its own: a second
// set of block ids, indexing the backend's second KV store, with its own
// table per sequence. The global group (the Pool's own blocks) is what it
// always was; the window group's table holds `none` for the blocks that
// have fallen out of every window layer's reach, and those blocks go back
// to the window group's free list (cached, when indexed) as the sequence
// advances:
//
//	position 1300, W 512, 16-token blocks
//	global  [b0 b1 … b81]          every block kept
//	window  [ -  - … - w49 … w81]  blocks wholly below 1300−512+1 released
//
// A window table therefore holds at most the blocks covering
// [computed−W+1, computed+chunk): ⌈(W−1)/BlockSize⌉+1 per decoding
// sequence, whatever its length.
//
// Prefix caching: both groups index their blocks under the same chained
// hashes. A hit of L tokens resumes computing at position L, whose window is
// (L−W, L], so Lookup keeps the longest prefix whose window-group blocks
// covering [L−W+1, L) are all still indexed; the global group's chain alone
// is not enough. Window blocks released mid-sequence stay indexed (cached)
// until evicted, so a resume or a shared prefix finds them while they last.
// KV events (Events) report both groups' indexes, each event naming its
// group, so a router replaying them predicts the trimmed hit (PredictHit).
//
// Speculation: a step's draft rows read the window blocks of the verified
// tokens before them, which stay in the table because Commit releases by
// computed (verified) tokens only; Truncate then cuts both groups' tails
// to the kept tokens (winTruncate).

// WindowConfig adds a sliding-window block group to a pool.
type WindowConfig struct {
	Window int // W: a row at position p reads (p−W, p]; 0 = no window group
	Blocks int // blocks in the window group's pool (its KV store holds as many)
}

// windowGroup is a pool's window block group: an inner Pool for the ids and
// the index, and the window its layers read.
type windowGroup struct {
	pool   *Pool
	window int
}

// windowTable is a sequence's window-group table: blocks[i] is none for
// i < lo, the blocks already released.
type windowTable struct {
	Table
	lo int
}

// windowPrefix is the window group's share of a Lookup hit: the blocks
// [lo, lo+len(blocks)) of the prefix.
type windowPrefix struct {
	blocks []int32
	lo     int
	unref  int
}

func newWindowGroup(cfg Config) (*windowGroup, error) {
	w := cfg.Window
	if w.Window == 0 && w.Blocks == 0 {
		return nil, nil
	}
	if w.Window <= 0 || w.Blocks <= 0 {
		return nil, fmt.Errorf("%w: window %d over %d blocks", ErrConfig, w.Window, w.Blocks)
	}
	inner, err := NewPool(Config{Blocks: w.Blocks, BlockSize: cfg.BlockSize, PrefixCaching: cfg.PrefixCaching, Events: cfg.Events})
	if err != nil {
		return nil, err
	}
	inner.group = Group{Index: 1, Window: w.Window, Groups: 2}
	return &windowGroup{pool: inner, window: w.Window}, nil
}

// WindowUsage is the window group's block counts; ok is false for a pool
// without one.
func (p *Pool) WindowUsage() (u Usage, ok bool) {
	if p.win == nil {
		return Usage{}, false
	}
	return p.win.pool.Usage(), true
}

// WindowStats are the window group's counters (zero without one).
func (p *Pool) WindowStats() Stats {
	if p.win == nil {
		return Stats{}
	}
	return p.win.pool.stats
}

// WindowBlocks is t's window-group table, none (−1) for released blocks; nil
// for a pool without a window group. It stays valid until t next changes.
func (t *Table) WindowBlocks() []int32 {
	if t.win == nil {
		return nil
	}
	return t.win.blocks
}

// first is the first block a row at position pos still reads.
func (g *windowGroup) first(pos, bs int) int {
	return max(pos-g.window+1, 0) / bs
}

// canAllocate is CanAllocate's check for the window group; reserve is the
// global group's, scaled to the window group's size.
func (p *Pool) winCanAllocate(t *Table, pre *Prefix, n, reserve int) bool {
	g := p.win
	if g == nil {
		return true
	}
	have, shared := 0, 0
	if t.win != nil {
		have = len(t.win.blocks)
	}
	if t.shares(pre) {
		have, shared = len(pre.blocks), pre.win.unref
	}
	r := (reserve*len(g.pool.blocks) + len(p.blocks) - 1) / len(p.blocks)
	return max(p.BlocksFor(n)-have, 0)+shared+r <= g.pool.nFree
}

// winAllocate is Allocate's part for the window group. It runs before the
// global group's, while an empty t still says whether pre is to be shared;
// CanAllocate has passed.
func (p *Pool) winAllocate(t *Table, pre *Prefix) {
	g := p.win
	if g == nil {
		return
	}
	if t.win == nil {
		t.win = new(windowTable)
	}
	wt := t.win
	wt.salt = t.salt // both groups chain the same hashes
	if !t.shares(pre) {
		return
	}
	for range pre.win.lo {
		wt.blocks = append(wt.blocks, none)
	}
	for _, id := range pre.win.blocks {
		g.pool.share(id)
	}
	wt.blocks = append(wt.blocks, pre.win.blocks...)
	wt.hashes = append(wt.hashes, pre.hashes...)
	wt.lo = pre.win.lo
	g.pool.stats.HitBlocks += int64(len(pre.win.blocks))
}

// winGrow gives t's window table fresh blocks up to n tokens, after the
// global group has grown.
func (p *Pool) winGrow(t *Table, n int) {
	if p.win == nil {
		return
	}
	for wt := t.win; len(wt.blocks) < p.BlocksFor(n); {
		wt.blocks = append(wt.blocks, p.win.pool.takeFresh())
	}
}

// winFree returns t's window blocks, last first, like Free.
func (p *Pool) winFree(t *Table) {
	if p.win == nil || t.win == nil {
		return
	}
	p.win.pool.Free(&t.win.Table)
	t.win.lo = 0
}

// winCommit indexes t's complete window blocks (the same hash chain as the
// global group's), then releases those no row at or after computed reads.
// Indexing first lets a released block serve a later hit while it is cached.
func (p *Pool) winCommit(t *Table, tokens []int32, computed int) {
	g := p.win
	if g == nil || t.win == nil {
		return
	}
	wt := t.win
	g.pool.Commit(&wt.Table, tokens, computed)
	end := min(g.first(computed, p.bs), len(wt.blocks))
	for ; wt.lo < end; wt.lo++ {
		g.pool.release(wt.blocks[wt.lo])
		wt.blocks[wt.lo] = none
	}
}

// winTruncate is Truncate's part for the window group: t's window table
// gives back its blocks past the first keep. Speculation needs nothing else
// of the group: Commit releases window blocks by verified tokens only (the
// scheduler counts a step's drafts computed once Accept has verified them),
// so every block a draft row reads stays in the table until then, and the
// blocks cut here hold no verified token, so none is indexed or shared.
// keep below lo (a table cut under its released blocks) leaves it all
// released, consistent for the accounting though it cannot resume there.
func (p *Pool) winTruncate(t *Table, keep int) {
	if p.win == nil || t.win == nil {
		return
	}
	wt := t.win
	for i := len(wt.blocks) - 1; i >= keep; i-- {
		if id := wt.blocks[i]; id != none {
			p.win.pool.release(id)
		}
	}
	if keep < len(wt.blocks) {
		wt.blocks = wt.blocks[:keep]
	}
	if len(wt.hashes) > keep {
		wt.hashes = wt.hashes[:keep]
	}
	wt.lo = min(wt.lo, len(wt.blocks))
}

// winTrim shortens a Lookup hit (pre, its global blocks found) to the
// longest prefix whose window-group blocks are all indexed too, and fills
// pre.win with them.
func (p *Pool) winTrim(pre *Prefix, tokens []int32) {
	g := p.win
	if g == nil {
		return
	}
	pw := &pre.win
	pw.blocks, pw.lo, pw.unref = pw.blocks[:0], 0, 0
	k := len(pre.blocks)
	for ; k > 0; k-- {
		lo := g.first(k*p.bs, p.bs)
		if p.winFind(pw, pre.hashes, tokens, lo, k) {
			break
		}
	}
	if k < len(pre.blocks) {
		pre.blocks, pre.hashes = pre.blocks[:k], pre.hashes[:k]
		pre.unref = 0
		for _, id := range pre.blocks {
			if p.blocks[id].ref == 0 {
				pre.unref++
			}
		}
	}
}

// winFind fills pw with the window group's indexed blocks lo…k−1 of the
// chain hashes, reporting whether all of them are there.
func (p *Pool) winFind(pw *windowPrefix, hashes []uint64, tokens []int32, lo, k int) bool {
	inner := p.win.pool
	pw.blocks, pw.lo, pw.unref = pw.blocks[:0], lo, 0
	for i := lo; i < k; i++ {
		var parent uint64
		if i > 0 {
			parent = hashes[i-1]
		}
		id, ok := inner.index[hashes[i]]
		if !ok || !inner.holds(id, parent, tokens[i*p.bs:(i+1)*p.bs]) {
			pw.blocks = pw.blocks[:0]
			return false
		}
		pw.blocks = append(pw.blocks, id)
		if inner.blocks[id].ref == 0 {
			pw.unref++
		}
	}
	return true
}

// winCheckRefs is CheckRefs for the window group: the inner pool's
// invariants, released entries exactly those below lo, and reference counts
// matching the live window tables.
func (p *Pool) winCheckRefs(tables []*Table) error {
	g := p.win
	if g == nil {
		return nil
	}
	inner := g.pool
	if err := inner.CheckInvariants(); err != nil {
		return fmt.Errorf("window group: %w", err)
	}
	refs := make([]int32, len(inner.blocks))
	for ti, t := range tables {
		if t.win == nil {
			if len(t.blocks) > 0 {
				return invariantf("table %d holds %d global blocks and no window table", ti, len(t.blocks))
			}
			continue
		}
		wt := t.win
		if len(wt.blocks) != len(t.blocks) {
			return invariantf("table %d: %d window blocks for %d global", ti, len(wt.blocks), len(t.blocks))
		}
		for i, id := range wt.blocks {
			if (id == none) != (i < wt.lo) {
				return invariantf("table %d window block %d is %d with %d released", ti, i, id, wt.lo)
			}
			if id == none {
				continue
			}
			if id < 0 || int(id) >= len(inner.blocks) {
				return invariantf("table %d holds window block %d out of range", ti, id)
			}
			refs[id]++
		}
	}
	for id, r := range refs {
		if inner.blocks[id].ref != r {
			return invariantf("window block %d ref=%d, held by %d tables", id, inner.blocks[id].ref, r)
		}
	}
	return nil
}

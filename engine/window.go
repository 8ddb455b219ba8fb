package engine

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// A model whose sliding-window layers keep their KV in a store of their own
// (models.Options.WindowKV) runs on a pool with kvcache's window group:
// Config.Window and WindowBlocks size it, each step's Batch carries the
// group's slots and tables beside the global ones, and the group releases
// the blocks no window row reads any more (docs/sliding-window.md).

func (c *Config) windowGroup() kvcache.WindowConfig {
	return kvcache.WindowConfig{Window: c.Window, Blocks: c.WindowBlocks}
}

// checkWindow refuses a window group too small for one sequence alone, which
// would never run: its table holds the blocks of [computed−W+1,
// computed+chunk), at most ⌈(W−1+maxBatch)/bs⌉+1.
func (c *Config) checkWindow(maxBatch int) error {
	if c.WindowBlocks == 0 {
		return nil
	}
	if need := (c.Window-1+maxBatch+c.BlockSize-1)/c.BlockSize + 1; c.WindowBlocks < need {
		return fmt.Errorf("%w: %d window blocks; a window of %d and steps of %d tokens need %d", ErrConfig, c.WindowBlocks, c.Window, maxBatch, need)
	}
	return nil
}

// windowRows lays out the window group's share of q's rows [start,
// start+n), the last sequence appended to b.
func windowRows(b *kernels.Batch, q *scheduler.Seq, start, n int, bs int32) {
	table := q.WindowBlocks()
	if table == nil {
		return
	}
	for pos := int32(start); pos < int32(start+n); pos++ {
		b.WindowSlots = append(b.WindowSlots, table[pos/bs]*bs+pos%bs)
	}
	b.Seqs[len(b.Seqs)-1].WindowBlocks = table
}

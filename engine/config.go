package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// ErrConfig reports an invalid engine configuration (from New).
var ErrConfig = errors.New("engine: invalid config")

// DefaultMaxQueue bounds the waiting queue when Config.MaxQueue is 0.
const DefaultMaxQueue = 256

// Config sizes the engine. Zero fields take the defaults of the packages
// that own them (kvcache, scheduler) or of this one.
type Config struct {
	// Blocks and BlockSize size the KV pool; the Model's KV store must have
	// been made with the same figures (slot = block*BlockSize + pos%BlockSize).
	Blocks    int
	BlockSize int // 0 = kvcache.DefaultBlockSize
	// Window and WindowBlocks add kvcache's window group, for a model whose
	// window layers keep their KV apart (window.go); 0 = none.
	Window, WindowBlocks int

	MaxBatchTokens int // tokens per step (0 = scheduler default)
	// MaxPrefillTokensWithDecodes caps the prompt tokens of a step that also
	// decodes, which bounds how long a new request's prefill stalls the
	// running streams (0 = scheduler default; ≥ MaxBatchTokens = no cap).
	MaxPrefillTokensWithDecodes int
	MaxSeqs                     int     // sequences running at once (0 = scheduler default)
	Watermark                   float64 // fraction of KV blocks admission keeps free
	AgingSteps                  int     // steps of waiting worth one priority level (0 = scheduler default)

	// MaxQueue bounds sequences accepted but not yet started, shared fairly
	// between tenants (Request.Tenant): beyond it Submit refuses a tenant
	// that holds its share (MaxQueue over the tenants waiting) with
	// ErrTenantQueueFull, while one under its share is still accepted, up
	// to 2×MaxQueue in all (ErrQueueFull past that). With one tenant it is
	// simply the bound.
	MaxQueue int

	// EOG are the model's end-of-generation token ids (EOS, EOT, <|im_end|>…).
	EOG []int32

	// DisablePrefixCache turns off reuse of computed prompt blocks.
	DisablePrefixCache bool

	// Observer, when set, is called from the engine loop (see Observer).
	Observer Observer

	// Speculate turns on speculative decoding (spec.go).
	Speculate SpecConfig

	// KVEvents, when set, hears every prefix-cache commit and eviction, on
	// the engine loop (see kvcache.Events): a KV-event publisher for routers.
	KVEvents kvcache.Events
}

// validate fills in the defaults this package owns (BlockSize, MaxQueue) and
// then checks c against m; the scheduler fills its own when New builds it.
func (c *Config) validate(m Model) error {
	if m == nil {
		return fmt.Errorf("%w: nil model", ErrConfig)
	}
	if c.BlockSize == 0 {
		c.BlockSize = kvcache.DefaultBlockSize
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	switch {
	case c.Blocks <= 0 || c.BlockSize <= 0 || int64(c.Blocks)*int64(c.BlockSize) > math.MaxInt32:
		return fmt.Errorf("%w: %d blocks of %d tokens", ErrConfig, c.Blocks, c.BlockSize)
	case c.MaxQueue < 0:
		return fmt.Errorf("%w: MaxQueue %d", ErrConfig, c.MaxQueue)
	case m.VocabSize() <= 0 || m.ContextLen() <= 1:
		return fmt.Errorf("%w: model vocab %d, context %d", ErrConfig, m.VocabSize(), m.ContextLen())
	}
	if err := c.Speculate.validate(); err != nil {
		return err
	}
	for _, id := range c.EOG {
		if id < 0 || int(id) >= m.VocabSize() {
			return fmt.Errorf("%w: EOG id %d outside vocab %d", ErrConfig, id, m.VocabSize())
		}
	}
	return nil
}

func (c *Config) schedulerConfig() scheduler.Config {
	return scheduler.Config{
		MaxBatchTokens:              c.MaxBatchTokens,
		MaxPrefillTokensWithDecodes: c.MaxPrefillTokensWithDecodes,
		MaxSeqs:                     c.MaxSeqs,
		Watermark:                   c.Watermark,
		AgingSteps:                  c.AgingSteps,
		MaxLogitRows:                c.Speculate.LogitRows,
	}
}

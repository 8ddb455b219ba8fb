package loader

import (
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/constrain"
	"github.com/sluicehq/sluice/engine"
)

// grammars compiles structured-output constraints for a model. llguidance's
// vocabulary (a trie over every token's bytes) is built on the first request
// that needs one, not at load: most servers and every test that never asks
// for structured outputs skip the cost.
type grammars struct {
	m     *Model
	once  sync.Once
	vocab *constrain.Vocab
	err   error
}

func (g *grammars) Compile(gr constrain.Grammar, resume []int32) (engine.Constraint, error) {
	g.once.Do(func() {
		// Masks cover the model's logits row, which may be longer than the
		// tokenizer's vocabulary (padded embeddings): the rest is never allowed.
		g.vocab, g.err = constrain.NewVocab(g.m.Tokenizer.HFJSON(), g.m.Net.VocabSize(), g.m.Tokenizer.EOGIDs())
	})
	if g.err != nil {
		return nil, g.err
	}
	m, err := g.vocab.NewMatcher(gr)
	if err != nil {
		return nil, err
	}
	for i, id := range resume {
		if err := m.Commit(id); err != nil {
			return nil, fmt.Errorf("loader: replaying resumed token %d: %w", i, err)
		}
	}
	return m, nil
}

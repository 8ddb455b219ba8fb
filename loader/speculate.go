package loader

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// resolveDraft settles the proposer a draft model implies: a draft model
// alone turns on method draft (llama.cpp's --model-draft does as much);
// one given with another method, or method draft without one, is refused.
func resolveDraft(o *Options) error {
	switch {
	case o.DraftModel != "" && o.Speculate.Method == "":
		o.Speculate.Method = "draft"
	case o.DraftModel != "" && o.Speculate.Method != "draft":
		return fmt.Errorf("loader: a draft model drafts only for speculative method draft, not %q", o.Speculate.Method)
	case o.DraftModel == "" && o.Speculate.Method == "draft":
		return fmt.Errorf("loader: speculative method draft needs a draft model (--draft-model)")
	}
	return nil
}

// openDraft opens o.DraftModel once (m.draftSrc); nil without one.
func (m *Model) openDraft(o Options) (models.WeightSource, error) {
	if o.DraftModel == "" {
		return nil, nil
	}
	if m.draftSrc == nil {
		src, err := models.Open(o.DraftModel)
		if err != nil {
			return nil, fmt.Errorf("loader: draft model: %w", err)
		}
		m.draftSrc = src
	}
	return m.draftSrc, nil
}

// assistantDraft reports whether o's draft model is a Gemma 4 assistant,
// which drafts from the target's own K/V: the target's window layers must
// then keep every position in the global store (WindowKV off), where the
// assistant reads them and whence verification rolls back.
func (m *Model) assistantDraft(o Options) bool {
	src, err := m.openDraft(o)
	return err == nil && src != nil && models.IsGemma4Assistant(src)
}

// loadDraft loads o.DraftModel on the target's backend, with as many KV
// blocks as the target's pool (mo, after defaults) so that whatever fits
// the target fits its draft, and a logit row per sequence (a draft forward
// asks one row of each sequence), into spec. A Gemma 4 assistant is bound
// to the target instead (spec.Assistant), a row per sequence, no KV.
func (m *Model) loadDraft(o Options, mo models.Options, seqs int, spec *engine.SpecConfig) error {
	src, err := m.openDraft(o)
	if err != nil || src == nil {
		return err
	}
	if models.IsGemma4Assistant(src) {
		if err := sameVocab(m.Tokenizer, src); err != nil {
			return fmt.Errorf("loader: draft model %s: %w", o.DraftModel, err)
		}
		target, ok := m.Net.(*models.Llama)
		if !ok {
			return fmt.Errorf("loader: draft model %s is a Gemma 4 assistant, which drafts only for a Gemma 4 target", o.DraftModel)
		}
		a, err := models.LoadGemma4Assistant(src, target, seqs)
		if err != nil {
			return fmt.Errorf("loader: draft model: %w", err)
		}
		spec.Assistant = a
		return nil
	}
	if models.IsQwen35(src) {
		return fmt.Errorf("loader: draft model %s is a hybrid (recurrent) model, whose state cannot be rolled back to the verified tokens", o.DraftModel)
	}
	if err := sameVocab(m.Tokenizer, src); err != nil {
		return fmt.Errorf("loader: draft model %s: %w", o.DraftModel, err)
	}
	// Window layers in the global store (WindowKV off) keep every
	// position, so the draft's KV rolls back as a plain model's does.
	d, err := models.Load(src, m.be, models.Options{MaxBatchTokens: mo.MaxBatchTokens, MaxSeqs: seqs,
		BlockSize: mo.BlockSize, KVBlocks: mo.KVBlocks, ContextLen: o.ContextLen})
	if err != nil {
		return fmt.Errorf("loader: draft model: %w", err)
	}
	spec.Draft, spec.DraftBlocks = d, d.Options().KVBlocks
	return nil
}

// sameVocab checks that src's tokenizer gives every id the target's token
// and the target's special ids: a draft's guesses are ids, verified as the
// target's.
func sameVocab(target *tokenizer.Tokenizer, src models.WeightSource) error {
	v, err := src.Vocab()
	if err != nil {
		return err
	}
	var tok *tokenizer.Tokenizer
	if v != nil {
		tok, err = tokenizer.New(v)
	} else {
		tok, err = tokenizer.FromHFDir(src.Path())
	}
	if err != nil {
		return err
	}
	defer tok.Close()
	switch {
	case tok.VocabSize() != target.VocabSize():
		return fmt.Errorf("vocabulary of %d tokens, the target's has %d", tok.VocabSize(), target.VocabSize())
	case tok.BOS() != target.BOS() || tok.EOS() != target.EOS():
		return fmt.Errorf("BOS %d and EOS %d, the target's are %d and %d", tok.BOS(), tok.EOS(), target.BOS(), target.EOS())
	case fmt.Sprint(tok.EOGIDs()) != fmt.Sprint(target.EOGIDs()):
		return fmt.Errorf("end-of-generation ids %v, the target's are %v", tok.EOGIDs(), target.EOGIDs())
	}
	for id := range int32(tok.VocabSize()) {
		if string(tok.TokenBytes(id)) != string(target.TokenBytes(id)) || tok.IsSpecial(id) != target.IsSpecial(id) {
			return fmt.Errorf("token %d is %q (special %v), the target's is %q (special %v)", id,
				tok.TokenBytes(id), tok.IsSpecial(id), target.TokenBytes(id), target.IsSpecial(id))
		}
	}
	return nil
}

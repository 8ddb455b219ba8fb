// Package loader is the composition root: it loads a model file into a
// running engine and adapts it to the stream core's interfaces: weights on
// a kernels backend (CPU unless told), the tokenizer from the file's own
// vocabulary, an engine sized to the model's KV pool (and, for a hybrid
// model such as Qwen3.5, its recurrent-state slots). `sluice serve`,
// `sluice generate` and the end-to-end tests wire through it.
//
// Concurrency: a Model is safe for concurrent use once Load returns; Close
// must be called once, after the transports stopped submitting.
package loader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/server/stream"
	"github.com/sluicehq/sluice/tokenizer"
)

// Options size the engine. Zero fields take the defaults of models and engine.
type Options struct {
	Threads        int // CPU backend goroutines (default 1)
	ContextLen     int // caps the model's context (0 = the model's own)
	KVBlocks       int // KV pool blocks (0 = as many as the default KV memory holds)
	MaxSeqs        int // sequences running at once
	MaxBatchTokens int // tokens per step
	// MaxPrefillTokensWithDecodes caps a step's prompt tokens while others
	// decode, bounding their stall when a request arrives (0 = the
	// scheduler's default).
	MaxPrefillTokensWithDecodes int
	MaxQueue                    int // sequences waiting beyond MaxSeqs before 429
	Observer                    engine.Observer
	// KVEvents hears the prefix cache's stores and evictions (nil: nobody);
	// see engine.Config.KVEvents.
	KVEvents kvcache.Events
	// NewBackend makes the backend the weights go to (nil: the CPU backend
	// with Threads goroutines). `sluice-cuda --backend cuda` passes the GPU's.
	NewBackend func() (kernels.Backend, error)
	// ChatTemplate replaces the model's chat template (Jinja source, as
	// tokenizer.ChatTemplate resolves `--chat-template`); "" keeps the file's,
	// and a base model without one answers chat requests with 400.
	ChatTemplate string
	// ReasoningFormat overrides how the model's reasoning is split from its
	// answer (stream.ReasoningFormats; "none" turns the split off); "" is
	// the architecture's (models.Config.Reasoning), else think-tags when
	// the chat template writes </think>.
	ReasoningFormat string
	// Speculate turns on speculative decoding (engine.SpecConfig; Method ""
	// = off). The model is then loaded for MaxSeqs·(1+K) logit rows, so a
	// full batch can carry its drafts' rows.
	Speculate engine.SpecConfig
	// DraftModel is a model file of the target's vocabulary whose greedy
	// guesses are the drafts (Speculate.Method "draft", which it implies);
	// it runs on the same backend with a KV pool of its own (speculate.go).
	DraftModel string
	// WrapModel, when set, stands between the engine and the model: the
	// fault-injecting build of the CLI (tag faultinject) wraps it there.
	WrapModel func(engine.Model) engine.Model
}

// Net is the loaded network as the engine, the transports and the CLI see
// it, whatever its architecture: a *models.Llama (every attention-only
// layout) or a *models.Qwen35 (the hybrid of Gated DeltaNet and attention,
// an engine.RecurrentModel).
type Net interface {
	engine.Model
	// Options are the figures after defaults (KV blocks, batch, sequences):
	// the engine's pool was sized from them.
	Options() models.Options
}

// Model is a loaded model behind a running engine.
type Model struct {
	ID        string // the file name without extension: what /v1/models lists
	Engine    *engine.Engine
	Tokenizer *tokenizer.Tokenizer
	Net       Net
	src       models.WeightSource
	draftSrc  models.WeightSource // Options.DraftModel's file; nil without
	be        kernels.Backend
	grammars  grammars // structured outputs, shared by every transport's Backend
	// Reasoning is the model's reasoning markup (Options.ReasoningFormat).
	Reasoning stream.ReasoningMarkup
}

// Load opens a GGUF file or a Hugging Face directory and starts an engine on it.
func Load(path string, o Options) (*Model, error) {
	src, err := models.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{ID: ModelID(path), src: src}
	m.grammars.m = m
	if err := m.load(o); err != nil {
		_ = src.Close()
		if m.draftSrc != nil {
			_ = m.draftSrc.Close()
		}
		if m.Tokenizer != nil {
			m.Tokenizer.Close()
		}
		if m.be != nil {
			_ = m.be.Close()
		}
		return nil, err
	}
	return m, nil
}

func (m *Model) load(o Options) error {
	if err := resolveDraft(&o); err != nil {
		return err
	}
	vocab, err := m.src.Vocab()
	if err != nil {
		return err
	}
	if vocab != nil {
		m.Tokenizer, err = tokenizer.New(vocab)
	} else { // a Hugging Face directory: tokenizer.json beside the weights
		m.Tokenizer, err = tokenizer.FromHFDir(m.src.Path())
	}
	if err != nil {
		return err
	}
	if o.ChatTemplate != "" {
		m.Tokenizer.SetChatTemplate(o.ChatTemplate)
	}
	if o.NewBackend != nil {
		if m.be, err = o.NewBackend(); err != nil {
			return err
		}
	} else {
		m.be = cpu.New(o.Threads)
	}
	mo := models.Options{
		MaxBatchTokens: o.MaxBatchTokens, MaxSeqs: o.MaxSeqs, KVBlocks: o.KVBlocks, ContextLen: o.ContextLen,
		WindowKV: true, // window layers keep only their window's KV (kvcache window.go)
	}
	if m.assistantDraft(o) { // speculate.go: it reads every position of the target's window layers
		mo.WindowKV = false
	}
	seqs := o.MaxSeqs
	if seqs <= 0 {
		seqs = scheduler.DefaultMaxSeqs
	}
	if o.Speculate.Method != "" {
		// models.Options.MaxSeqs is the logit rows one Forward returns.
		mo.MaxSeqs = seqs * (1 + cmp.Or(o.Speculate.K, engine.DefaultSpecK))
		mo.Sequences = seqs
	}
	var window, windowBlocks int
	var format models.ReasoningFormat
	if models.IsQwen35(m.src) {
		// Qwen3.5/3.6: models.Config refuses the hybrid layout; it has no
		// window layers, and its recurrent state is sized by the model
		// itself (engine.RecurrentModel hands the engine its slot count).
		var q *models.Qwen35
		if q, err = models.LoadQwen35Source(m.src, m.be, mo); err != nil {
			return err
		}
		m.Net = q
		format = models.ReasoningThinkTags // Qwen3.5/3.6 think as Qwen3 does
	} else {
		var l *models.Llama
		if l, err = models.Load(m.src, m.be, mo); err != nil {
			return err
		}
		m.Net = l
		window, windowBlocks = l.KVWindow()
		format = l.Config().Reasoning()
	}
	if format == models.ReasoningNone && strings.Contains(m.Tokenizer.ChatTemplate(), "</think>") {
		format = models.ReasoningThinkTags
	}
	if o.ReasoningFormat != "" {
		format = models.ReasoningFormat(o.ReasoningFormat)
	}
	if m.Reasoning, err = stream.ReasoningMarkupFor(string(format)); err != nil {
		return err
	}
	mo = m.Net.Options() // the figures after defaults: the engine must use the same pool
	var run engine.Model = m.Net
	if o.WrapModel != nil {
		run = o.WrapModel(run)
		if _, rec := m.Net.(engine.RecurrentModel); rec {
			if _, still := run.(engine.RecurrentModel); !still {
				// Without its state slots the engine would run every
				// sequence on no state: refuse rather than serve garbage.
				return fmt.Errorf("loader: the model wrapper hides the recurrent state of %s", m.ID)
			}
		}
	}
	spec := o.Speculate
	if spec.Method != "" {
		spec.LogitRows = mo.MaxSeqs
		mo.MaxSeqs = min(seqs, mo.MaxSeqs) // sequences; the rest of the rows are drafts'
	}
	if err := m.loadDraft(o, mo, seqs, &spec); err != nil {
		return err
	}
	if err := m.loadMTP(mo, &spec); err != nil { // mtp.go
		return err
	}
	m.Engine, err = engine.New(run, engine.Config{
		Blocks: mo.KVBlocks, BlockSize: mo.BlockSize, MaxBatchTokens: mo.MaxBatchTokens, MaxSeqs: mo.MaxSeqs, Speculate: spec,
		Window: window, WindowBlocks: windowBlocks,
		MaxPrefillTokensWithDecodes: o.MaxPrefillTokensWithDecodes, MaxQueue: o.MaxQueue,
		EOG: m.Tokenizer.EOGIDs(), Observer: o.Observer, KVEvents: o.KVEvents,
	})
	return err
}

// ModelID is the id a model file is served under: its base name without
// the .gguf extension.
func ModelID(path string) string {
	return strings.TrimSuffix(filepath.Base(filepath.Clean(path)), ".gguf")
}

// Backend adapts the model to the transports.
func (m *Model) Backend() *stream.Backend {
	return &stream.Backend{Engine: stream.FromEngine(m.Engine), Tokenizer: tokAdapter{m.Tokenizer}, ContextLen: m.Net.ContextLen(), Grammars: &m.grammars,
		Reasoning: m.Reasoning}
}

// Close stops the engine (open sequences end with CauseShutdown) and frees the model.
func (m *Model) Close(ctx context.Context) error {
	err := m.Engine.Close(ctx)
	m.Tokenizer.Close()
	if m.draftSrc != nil {
		err = errors.Join(err, m.draftSrc.Close())
	}
	return errors.Join(err, m.be.Close(), m.src.Close())
}

type tokAdapter struct{ t *tokenizer.Tokenizer }

func (a tokAdapter) Encode(text string, addSpecial bool) ([]int32, error) {
	return a.t.Encode(text, addSpecial), nil
}

func (a tokAdapter) ChatPrompt(msgs []stream.ChatMessage) (string, error) {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	return a.t.ApplyChatTemplate(tm, true)
}

// GenerationPrompt is what the template appends for the assistant's turn
// (stream.GenerationPrompter: add_generation_prompt false).
func (a tokAdapter) GenerationPrompt() (string, error) { return a.t.GenerationPrompt() }

func (a tokAdapter) NewDetokenizer() stream.Detokenizer { return a.t.NewDecoder() }

// NewDetokenizerAfter gives the decoder the prompt's last tokens as context.
func (a tokAdapter) NewDetokenizerAfter(prompt []int32) stream.Detokenizer {
	return a.t.NewDecoder(prompt...)
}

// TokenBytes is one token's bytes, for logprobs (stream.TokenByter).
func (a tokAdapter) TokenBytes(id int32) []byte { return a.t.TokenBytes(id) }

// VocabSize bounds the token ids /detokenize accepts.
func (a tokAdapter) VocabSize() int { return a.t.VocabSize() }

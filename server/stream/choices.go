package stream

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/engine"
)

// Limits on a request's choices: n per prompt (OpenAI's n; the engine forks
// at most engine.MaxChoices sequences from one prefill), prompts in a
// completions list, and choices in all.
const (
	MaxN       = engine.MaxChoices
	MaxPrompts = 64
	MaxChoices = 64
)

// BatchPrompt is one prompt of a completions request's list: token ids when
// IDs is set, else Text.
type BatchPrompt struct {
	Text string
	IDs  []int32
}

// NumChoices is how many choices g asks for: N for each of its prompts.
func (g *GenRequest) NumChoices() int { return max(g.N, 1) * max(len(g.Batch), 1) }

// SetBatch stores a completions request's list of prompts (one choice set
// per prompt; a list of one is a single prompt).
func (g *GenRequest) SetBatch(prompts []BatchPrompt) error {
	switch {
	case len(prompts) == 0:
		return InvalidParam("prompt", "prompt must not be an empty list")
	case len(prompts) > MaxPrompts:
		return InvalidParam("prompt", "at most %d prompts in a list, got %d", MaxPrompts, len(prompts))
	}
	for i, p := range prompts {
		if p.IDs != nil && len(p.IDs) == 0 {
			return InvalidParam(fmt.Sprintf("prompt[%d]", i), "prompt[%d] is an empty list of token ids", i)
		}
	}
	if len(prompts) == 1 {
		g.Prompt, g.PromptIDs = prompts[0].Text, prompts[0].IDs
		return nil
	}
	g.Batch = prompts
	return nil
}

// setN reads n: 1 to MaxN choices per prompt.
func (g *GenRequest) setN(p Params) error {
	if p.N == nil {
		return nil
	}
	if n := *p.N; n < 1 || n > MaxN {
		return InvalidParam("n", "n must be between 1 and %d, got %d", MaxN, n)
	}
	if *p.N > 1 { // 1 stays the zero value: one choice
		g.N = *p.N
	}
	return nil
}

// PrepareChoices is Prepare for every choice of g, in response order: choice
// prompt*N + j (OpenAI's index) is the j-th of its prompt's N. The choices of
// one prompt share its tokens and differ in their seed (the request's seed,
// or the one Prepare drew, + j, so a seeded request gives the same choices
// every time) and in their constraint, one instance each. Prompt logprobs,
// when asked, are the first choice's request's alone.
func PrepareChoices(b *Backend, g *GenRequest) ([]engine.Request, error) {
	if n := g.NumChoices(); n > MaxChoices {
		return nil, InvalidParam("n", "at most %d choices in all (n times the prompts), got %d", MaxChoices, n)
	}
	prompts := g.Batch
	if len(prompts) == 0 {
		prompts = []BatchPrompt{{Text: g.Prompt, IDs: g.PromptIDs}}
	}
	n := max(g.N, 1)
	reqs := make([]engine.Request, 0, len(prompts)*n)
	for i, p := range prompts {
		gi := *g
		gi.Batch, gi.Prompt, gi.PromptIDs = nil, p.Text, p.IDs
		req, err := Prepare(b, &gi)
		if err != nil {
			if pe, ok := err.(*ParamError); ok && len(prompts) > 1 && pe.Param == "prompt" {
				pe.Param = fmt.Sprintf("prompt[%d]", i)
			}
			return nil, err
		}
		for j := range n {
			c := req
			seed := *req.Sampling.Seed + uint64(j)
			c.Sampling.Seed = &seed
			if j > 0 {
				// The prompt's logprobs are computed once, by its first
				// choice (a group's leader, whose prefill the others fork),
				// and every choice of the prompt reports them from there.
				c.PromptLogprobs = nil
			}
			if j > 0 && req.Constraint != nil {
				if c.Constraint, err = b.constraint(g, nil); err != nil {
					return nil, err
				}
			}
			reqs = append(reqs, c)
		}
	}
	return reqs, nil
}

// GroupEngine is an Engine that prefills a prompt once for several choices
// (*engine.Engine's SubmitGroup). Found by type assertion; without it each
// choice is submitted alone.
type GroupEngine interface {
	SubmitGroup(ctx context.Context, reqs []engine.Request) ([]Sequence, error)
}

// SubmitChoices submits reqs, consecutive runs of n sharing a prompt
// (PrepareChoices' order), under one context derived from ctx: the choices
// answer one client, so its leaving, or a failed write through any of them,
// ends them all. On an error nothing is left running: what was submitted is
// cancelled and the engine frees it.
func SubmitChoices(ctx context.Context, e Engine, reqs []engine.Request, n int, abortOnDisconnect bool) ([]*Generation, error) {
	if len(reqs) == 0 || n < 1 {
		return nil, fmt.Errorf("%w: %d requests in groups of %d", engine.ErrInvalidRequest, len(reqs), n)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	shared := Generation{ctx: ctx, cancel: cancel} // one context for every choice
	engCtx := ctx
	if !abortOnDisconnect {
		engCtx = context.WithoutCancel(ctx)
	}
	gens := make([]*Generation, 0, len(reqs))
	for i := 0; i < len(reqs); i += n {
		seqs, err := submitGroup(engCtx, e, reqs[i:min(i+n, len(reqs))])
		if err != nil {
			for _, g := range gens {
				g.Seq.Abort(engine.CauseClientDisconnect) // engCtx may not show the cancel
			}
			shared.cancel(nil)
			return nil, fmt.Errorf("submit: %w", err)
		}
		for _, s := range seqs {
			g := shared
			g.Seq = s
			gens = append(gens, &g)
		}
	}
	return gens, nil
}

func submitGroup(ctx context.Context, e Engine, reqs []engine.Request) ([]Sequence, error) {
	if ge, ok := e.(GroupEngine); ok && len(reqs) > 1 {
		return ge.SubmitGroup(ctx, reqs)
	}
	seqs := make([]Sequence, 0, len(reqs))
	for _, req := range reqs {
		s, err := e.Submit(ctx, req)
		if err != nil {
			for _, s := range seqs {
				s.Abort(engine.CauseClientDisconnect)
			}
			return nil, err
		}
		seqs = append(seqs, s)
	}
	return seqs, nil
}

// ChoiceStream is one choice's share of a multi-choice response.
type ChoiceStream struct {
	Gen    *Generation
	Text   *TextStream
	Tools  *ToolStream   // nil unless the reply is parsed for tool calls
	Reason *ReasonStream // nil unless the model marks its reasoning
	Out    ToolEmitter   // the transport's emitter for this choice (its index)
	// End, when set, runs once the choice has ended, with its outcome
	// (tool calls counted in): a streaming transport writes the choice's
	// finish there, so each choice finishes when it ends.
	End func(Outcome)
}

// NewChoiceStream is the parse of one choice of g whose prompt is prompt:
// its text, its reasoning split and its tool calls, each its own, as a
// single choice's are (httpedge's driver). Gen, Out and End are the
// connection's to set.
func NewChoiceStream(b *Backend, g *GenRequest, prompt []int32) ChoiceStream {
	return ChoiceStream{Tools: NewToolStream(g), Reason: NewReasonStream(b, g, prompt),
		Text: NewTextStream(NewDetokenizerFor(b.Tokenizer, prompt), g.Stop)}
}

// ReasoningTokens is how many of the choice's tokens were its reasoning,
// as ReasonStream.End reports them: none when the reply never opened it.
func (c *ChoiceStream) ReasoningTokens() int {
	if c.Reason == nil || !c.Reason.inside {
		return 0
	}
	return c.Reason.tokens
}

// EndProduced ends a choice whose every token was produced before a
// stream was cut: what the TextStream still held goes through the
// reasoning split and the tool parse to out, and the choice ends as at
// the token limit.
func (c *ChoiceStream) EndProduced(out ToolEmitter) Outcome {
	_ = c.Reason.Use(c.Tools.Use(out), out).Text(c.Text.Finish(), nil) // a failed write shows in the next one
	return c.Tools.End(c.Reason.End(Outcome{Finish: "length"}))
}

// PumpChoices pumps every choice at once, each through its own TextStream
// and stop handling (Pump), and returns their outcomes by index once all
// have ended. The emitters write one connection, so every call into them
// (Text with its Logprobs, tool calls, Flush, End) is made under one lock:
// chunks of different choices interleave, never a chunk inside another. A
// stop string or stall ends only its own choice; a failed write cancels the
// shared context and so ends them all.
func PumpChoices(cs []ChoiceStream, cfg PumpConfig, shutdown <-chan struct{}) []Outcome {
	var mu sync.Mutex
	outs := make([]Outcome, len(cs))
	var wg sync.WaitGroup
	for i := range cs {
		c := &cs[i]
		em := &lockedEmitter{mu: &mu, em: c.Reason.Use(c.Tools.Use(c.Out), c.Out)}
		wg.Go(func() {
			out := Pump(c.Gen, c.Text, em, cfg, shutdown)
			mu.Lock()
			defer mu.Unlock()
			out = c.Tools.End(c.Reason.End(out))
			if c.End != nil {
				c.End(out)
			}
			outs[i] = out
		})
	}
	wg.Wait()
	return outs
}

// lockedEmitter serializes one choice's calls with the other choices'.
// Logprobs are held until their Text, so the pair goes out together.
type lockedEmitter struct {
	mu  *sync.Mutex
	em  Emitter
	lps []engine.Logprob
}

func (l *lockedEmitter) Logprobs(lps []engine.Logprob) { l.lps = append(l.lps[:0], lps...) }

func (l *lockedEmitter) Text(text string, ids []int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if le, ok := l.em.(LogprobEmitter); ok && len(l.lps) > 0 {
		le.Logprobs(l.lps)
	}
	l.lps = l.lps[:0]
	return l.em.Text(text, ids)
}

func (l *lockedEmitter) KeepAlive() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.em.KeepAlive()
}

func (l *lockedEmitter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.em.Flush()
}

func (l localEngine) SubmitGroup(ctx context.Context, reqs []engine.Request) ([]Sequence, error) {
	stamped := make([]engine.Request, len(reqs))
	for i, req := range reqs {
		stamped[i] = ForTenant(ctx, req) // as Submit does
	}
	seqs, err := l.e.SubmitGroup(ctx, stamped)
	if err != nil {
		return nil, err
	}
	out := make([]Sequence, len(seqs))
	for i, s := range seqs {
		out[i] = s
	}
	return out, nil
}

// ContinueChoices resumes the choices of a stream cut short (Continue for
// each one with live[i], from produced[i]) under one context, as
// SubmitChoices: a failed write through any of them ends them all. An entry
// is nil for a choice that was not live or had produced every token. Each
// choice is its own sequence now (a group forks only from a fresh prefill);
// its prompt comes from the prefix cache. On an error nothing is left
// running.
func ContinueChoices(ctx context.Context, b *Backend, g *GenRequest, reqs []engine.Request, produced [][]int32, live []bool) ([]*Generation, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	shared := Generation{ctx: ctx, cancel: cancel} // one context for every choice
	gens := make([]*Generation, len(reqs))
	for i := range reqs {
		if !live[i] {
			continue
		}
		req := reqs[i]
		// The prompt's logprobs are the first connection's: a choice that
		// restarts from no tokens would have the engine write them afresh
		// while the other choices' echoes read them.
		req.PromptLogprobs = nil
		gen, err := Continue(ctx, b, g, req, produced[i])
		if err != nil {
			for _, s := range gens {
				if s != nil {
					s.Seq.Abort(engine.CauseClientDisconnect) // the engine may not be shown the cancel
				}
			}
			shared.cancel(nil)
			return nil, err
		}
		if gen != nil {
			// Submit's own context is a child of ctx: the engine still sees
			// the shared cancel; Pump's leaving now cancels every choice.
			gen.ctx, gen.cancel = shared.ctx, shared.cancel
		}
		gens[i] = gen
	}
	if !slices.ContainsFunc(gens, func(g *Generation) bool { return g != nil }) {
		shared.cancel(nil) // nothing runs under it
	}
	return gens, nil
}

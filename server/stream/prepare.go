package stream

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Prepare turns g into the engine request every transport submits: the chat
// template applied, the prompt tokenized and checked against b.Limit (the
// model's context or the KV pool, whichever is smaller), and the sampler
// seed fixed, so a resumed generation samples exactly as the interrupted one
// would have.
func Prepare(b *Backend, g *GenRequest) (engine.Request, error) {
	param := "prompt"
	if g.Chat {
		param = "messages"
	}
	limit := b.Limit()
	prompt, err := truncatedPrompt(b, g, limit)
	if err != nil {
		return engine.Request{}, err
	}
	switch n := len(prompt); {
	case n == 0:
		return engine.Request{}, InvalidParam(param, "the prompt is empty after tokenization")
	case n >= limit: // context_length_exceeded, as OpenAI answers it
		return engine.Request{}, &ParamError{Param: param, Sentinel: engine.ErrPromptTooLong,
			Message: fmt.Sprintf("the prompt is %d tokens long; the model's context is %d tokens", n, limit)}
	case g.MaxTokens > limit-n: // not n+MaxTokens: that sum can overflow
		return engine.Request{}, &ParamError{Param: "max_tokens", Sentinel: engine.ErrPromptTooLong,
			Message: fmt.Sprintf("the model's context is %d tokens; the prompt (%d tokens) plus max_tokens (%d) exceed it", limit, n, g.MaxTokens)}
	case g.MinTokens > limit-n:
		return engine.Request{}, &ParamError{Param: "min_tokens", Sentinel: engine.ErrPromptTooLong,
			Message: fmt.Sprintf("the model's context is %d tokens; the prompt (%d tokens) plus min_tokens (%d) exceed it", limit, n, g.MinTokens)}
	}
	b.Force.Apply(g) // a test option (forcetool.go); the prompt is the request's own
	constraint, err := b.constraint(g, nil)
	if err != nil {
		return engine.Request{}, err
	}
	sp := g.Sampling
	if sp.Seed == nil {
		seed := randUint64()
		sp.Seed = &seed
	}
	req := engine.Request{Prompt: prompt, MaxTokens: g.MaxTokens, Sampling: sp, StopTokens: slices.Clone(g.StopTokens), Constraint: constraint,
		Logprobs: g.Logprobs, TopLogprobs: g.TopLogprobs, LogitBias: g.LogitBias, MinTokens: g.MinTokens, IgnoreEOS: g.IgnoreEOS,
		CacheSalt: g.CacheSalt}
	if echoed := g.Echo && g.Logprobs && !g.Chat; g.PromptLogprobs || echoed { // chat's echo has no prompt logprobs
		k := g.PromptTopLogprobs
		if echoed {
			k = max(k, g.TopLogprobs) // each framing keeps as many as it asked for
		}
		req.PromptLogprobs = &engine.PromptLogprobs{TopK: k}
	}
	return req, nil
}

// truncatedPrompt is the request's prompt, cut to its last
// TruncatePromptTokens tokens when it asks (vLLM's left truncation, after
// the template); only then may the text run past the context before it is
// cut.
func truncatedPrompt(b *Backend, g *GenRequest, limit int) ([]int32, error) {
	n := g.TruncatePromptTokens
	if n == 0 {
		return renderedPrompt(b, g, limit)
	}
	if n == -1 {
		n = limit
	}
	if n < 1 || n > limit {
		return nil, InvalidParam("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's context) or between 1 and the model's context, %d tokens; got %d", limit, g.TruncatePromptTokens)
	}
	prompt, err := renderedPrompt(b, g, 0)
	if err != nil {
		return nil, err
	}
	if len(prompt) > n {
		prompt = prompt[len(prompt)-n:]
	}
	return prompt, nil
}

// Generation is one submitted request: its sequence and the context the
// engine watches for it. The engine owns cancellation: whatever ends the
// context (the client leaving, a takeover, an Abort RPC, a failed write
// through Pump) ends the sequence there, and nothing else aborts it on the
// client's behalf. The context is released with the one Submit derived
// it from, so a transport may still write after Pump returns.
type Generation struct {
	Seq    Sequence
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Submit hands req to the engine under a context derived from ctx. With
// abortOnDisconnect off the engine is not shown the cancellation (the
// benchmark's naive mode: the sequence runs into the void), but Pump still
// sees the client leave.
func Submit(ctx context.Context, e Engine, req engine.Request, abortOnDisconnect bool) (*Generation, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	engCtx := ctx
	if !abortOnDisconnect {
		engCtx = context.WithoutCancel(ctx)
	}
	seq, err := e.Submit(engCtx, req)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("submit: %w", err)
	}
	return &Generation{Seq: seq, ctx: ctx, cancel: cancel}, nil
}

// Context ends when the client leaves or a write to it failed.
func (g *Generation) Context() context.Context { return g.ctx }

// CheckModel reports whether name selects the served model: "" does, and so
// do its id and aliases.
func CheckModel(name, id string, aliases []string) error {
	if name == "" || name == id || slices.Contains(aliases, name) {
		return nil
	}
	return fmt.Errorf("%w: %q (this server serves %q)", ErrModelNotFound, name, id)
}

// NewID returns a response or request id: prefix and 96 random bits.
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return fmt.Sprintf("%s%x", prefix, b)
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// FromEngine adapts an in-process engine to Engine.
func FromEngine(e *engine.Engine) Engine { return localEngine{e} }

type localEngine struct{ e *engine.Engine }

// Stats is the engine's latest snapshot: what /health reads to tell a
// wedged loop from a busy one.
func (l localEngine) Stats() *engine.Stats { return l.e.Stats() }

func (l localEngine) Submit(ctx context.Context, req engine.Request) (Sequence, error) {
	s, err := l.e.Submit(ctx, ForTenant(ctx, req))
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return s, nil
}

func (l localEngine) MaxSequenceLen() int { return l.e.MaxSequenceLen() }

// renderedPrompt is the prompt's tokens (encodePrompt, plaintext.go), with
// what vLLM's chat extensions ask of the rendering: custom roles the
// template must show, a final message to continue.
func renderedPrompt(b *Backend, g *GenRequest, limit int) ([]int32, error) {
	ids, err := encodePrompt(b, g, !g.Chat, limit)
	custom := -1
	if g.Chat {
		custom = g.customRole()
	}
	if err != nil {
		if pe, ok := err.(*ParamError); ok && custom >= 0 && pe.Param == "messages" && pe.Sentinel == nil {
			// The template raised or failed on the request's own role.
			return nil, InvalidParam(fmt.Sprintf("messages[%d].role", custom), "the chat template cannot render role %q: %s", g.Messages[custom].Role, pe.Message)
		}
		return nil, err
	}
	if custom < 0 && !g.ContinueFinalMessage && !g.NoGenerationPrompt {
		return ids, nil
	}
	tb, ok := b.Tokenizer.(TokenByter)
	if !ok {
		return nil, InvalidParam("messages", "this model's tokenizer cannot show its tokens' text, which custom roles and continue_final_message need")
	}
	text, ends := tokenText(tb, ids)
	for i, m := range g.Messages {
		if i >= custom && custom >= 0 && !isStandardRole(m.Role) && !strings.Contains(text, m.Role) {
			// A template that renders only the roles it knows drops the turn or its role.
			return nil, InvalidParam(fmt.Sprintf("messages[%d].role", i), "the chat template does not render role %q: it leaves it out of the prompt", m.Role)
		}
	}
	switch {
	case g.ContinueFinalMessage:
		return continueFinal(g, ids, text, ends)
	case g.NoGenerationPrompt:
		return withoutGenerationPrompt(b, g, ids, text, ends)
	}
	return ids, nil
}

// GenerationPrompter is a Tokenizer that says what its chat template
// appends for add_generation_prompt. Found by type assertion.
type GenerationPrompter interface {
	GenerationPrompt() (string, error)
}

// withoutGenerationPrompt takes the template's generation prompt off the
// end of the rendered chat, which then ends after the final message's turn
// (add_generation_prompt false): the rendering Hugging Face's
// apply_chat_template gives without it, for templates that append it last.
func withoutGenerationPrompt(b *Backend, g *GenRequest, ids []int32, text string, ends []int) ([]int32, error) {
	suffix, ok, err := generationPrompt(b.Tokenizer, g)
	if !ok {
		return nil, unsupported("add_generation_prompt", "this model's tokenizer cannot render a chat without its generation prompt")
	}
	if err != nil || !strings.HasSuffix(text, suffix) {
		return nil, unsupported("add_generation_prompt", "add_generation_prompt false: this chat template's generation prompt does not close its rendering, so it cannot be left out")
	}
	i := slices.Index(ends, len(text)-len(suffix))
	if i < 0 {
		return nil, unsupported("add_generation_prompt", "add_generation_prompt false: the generation prompt starts inside a token of the rendered prompt")
	}
	g.reasoningOpened = false
	return ids[:i+1], nil
}

// generationPrompt is what tok's template appends for
// add_generation_prompt given g's kwargs, which may change it (Qwen3's
// enable_thinking false closes an empty reasoning block there): the
// difference between a one-message chat rendered with and without it, as
// tokenizer.GenerationPrompt finds it. ok is false when tok cannot say.
func generationPrompt(tok Tokenizer, g *GenRequest) (suffix string, ok bool, err error) {
	kt, err := kwargsRenderer(tok, g)
	if err != nil {
		return "", true, err
	}
	if kt == nil {
		gp, ok := tok.(GenerationPrompter)
		if !ok {
			return "", false, nil
		}
		suffix, err := gp.GenerationPrompt()
		return suffix, true, err
	}
	probe := []map[string]any{{"role": "user", "content": "x"}}
	with, err := kt.RenderChatKwargs(probe, nil, true, g.TemplateKwargs)
	if err != nil {
		return "", true, err
	}
	without, err := kt.RenderChatKwargs(probe, nil, false, g.TemplateKwargs)
	if err != nil {
		return "", true, err
	}
	if len(with) <= len(without) || !strings.HasPrefix(with, without) {
		return "", true, fmt.Errorf("the chat template's generation prompt is not a suffix of its rendering")
	}
	return with[len(without):], true, nil
}

func isStandardRole(r string) bool {
	return r == "system" || r == "user" || r == "assistant" || r == "tool"
}

// tokenText is ids' bytes as text, and where each token's bytes end in it.
func tokenText(tb TokenByter, ids []int32) (string, []int) {
	var b strings.Builder
	ends := make([]int, len(ids))
	for i, id := range ids {
		b.Write(tb.TokenBytes(id))
		ends[i] = b.Len()
	}
	return b.String(), ends
}

// continueFinal cuts the rendered chat right after the final message's
// content, as Hugging Face's apply_chat_template does for
// continue_final_message (its last occurrence, or that of the content
// trimmed, for templates that trim it): the template's end of turn and
// generation prompt go, and the reply continues the message. The cut must
// fall between tokens, as it does when the end of turn is a control token.
func continueFinal(g *GenRequest, ids []int32, text string, ends []int) ([]int32, error) {
	content := g.Messages[len(g.Messages)-1].Content
	at := strings.LastIndex(text, content)
	if at < 0 || content == "" {
		content = strings.TrimSpace(content)
		at = strings.LastIndex(text, content)
	}
	if at < 0 || content == "" {
		return nil, InvalidParam("continue_final_message", "the chat template does not render the final message's content as given, so there is no end of it to continue from")
	}
	cut := at + len(content)
	i := slices.Index(ends, cut)
	if i < 0 {
		return nil, InvalidParam("continue_final_message", "the final message's content ends inside a token of the rendered prompt, so it cannot be continued exactly")
	}
	g.reasoningOpened = false // whatever opened past the cut is gone
	return ids[:i+1], nil
}

func unsupported(param, msg string) error {
	return &ParamError{Param: param, Message: msg, Sentinel: ErrUnsupported}
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// choicesSource and choicesFramer serve a request for several choices (n
// > 1, or a completions list of prompts, or both: choice index = prompt*n
// + j, as OpenAI numbers them) through the HTTP driver (httpedge.Env.Serve,
// API.Choices), like a single choice's: the driver starts, streams,
// retains for a resume and ends it; the source submits the choices (the
// stream core prefills each prompt once for its n choices,
// stream.SubmitChoices) and pumps them all at once (stream.PumpChoices);
// the framer frames every choice under its index and the stream's end.
// Both share one choices, which lasts the response, a resume included.
type choices struct {
	s       *Server
	b       *stream.Backend
	g       *stream.GenRequest
	reqs    []engine.Request
	formats []chunkFormat
	cs      []stream.ChoiceStream // Text and Tools last the response; Gen, Out and End one connection
	ended   []bool                // the choice's finish (or error) is settled
	errs    []error
	finish  []string          // a whole response's finish reasons
	cols    []choiceCollector // a whole response's choices
	cached  []int             // prompt tokens the first submission found in the prefix cache
	pending []int             // choices a resume found fully produced, whose finish is still to write
	sw      *sseWriter        // the connection's writer; nil: a whole response
	body    []byte
}

// newChoices prepares g's choices on b as response id: the driver's
// API.Choices.
func (s *Server) newChoices(b *stream.Backend, g *stream.GenRequest, id string) (httpedge.Source, httpedge.Framer, error) {
	reqs, err := stream.PrepareChoices(b, g)
	if err != nil {
		return nil, nil, err
	}
	for i := range reqs {
		reqs[i].ID = id
	}
	n := len(reqs)
	c := &choices{s: s, b: b, g: g, reqs: reqs, formats: make([]chunkFormat, n), cs: make([]stream.ChoiceStream, n),
		ended: make([]bool, n), errs: make([]error, n), finish: make([]string, n), cols: make([]choiceCollector, n), cached: make([]int, n)}
	base := newChunkFormat(g.Chat, id, s.modelName(g.Model), time.Now().Unix())
	for i := range reqs {
		c.formats[i] = base.withIndex(i)
		c.formats[i].lp = newLogprobFormat(b.Tokenizer, g)
		c.cs[i] = stream.NewChoiceStream(b, g, reqs[i].Prompt)
		if g.ContinuousUsage {
			// vLLM's per-choice figures: the choice's prompt and its tokens so far.
			c.formats[i].soFar = func() Usage {
				p, n := len(reqs[i].Prompt), len(c.cs[i].Text.IDs())
				return Usage{PromptTokens: p, CompletionTokens: n, TotalTokens: p + n}
			}
		}
	}
	return choicesSource{c}, &choicesFramer{c}, nil
}

// choicesSource is the choices' httpedge.Source.
type choicesSource struct{ *choices }

func (c choicesSource) Start(ctx context.Context) (httpedge.Generation, error) {
	gens, err := c.b.SubmitChoices(ctx, c.reqs, max(c.g.N, 1))
	if err != nil {
		return nil, err
	}
	return &choicesGen{c.choices, gens, true}, nil
}

// Continue goes on with every choice the cut left unfinished from its own
// tokens (stream.ContinueChoices: its seed, its sampler position, its stop
// and tool state), so the joined stream equals an uninterrupted one; a
// choice whose every token was produced before the cut only gets its
// ending (pending, written once the connection is attached). Nothing is
// generated twice.
func (c choicesSource) Continue(ctx context.Context) (httpedge.Generation, error) {
	b, err := c.s.env.LoadBackend()
	if err != nil {
		return nil, err
	}
	produced, live := make([][]int32, len(c.cs)), make([]bool, len(c.cs))
	for i := range c.cs {
		live[i], produced[i] = !c.ended[i], c.cs[i].Text.IDs()
	}
	gens, err := stream.ContinueChoices(ctx, b, c.g, c.reqs, produced, live)
	if err != nil {
		return nil, err
	}
	c.pending, c.b = c.pending[:0], b
	running := false
	for i, gen := range gens {
		running = running || gen != nil
		if live[i] && gen == nil {
			c.pending = append(c.pending, i)
		}
	}
	if !running {
		return nil, nil // only endings are missing: Rest
	}
	return &choicesGen{c.choices, gens, false}, nil
}

// Rest writes the endings of the choices a resume found fully produced
// when none had tokens left to generate.
func (c choicesSource) Rest(httpedge.Framer) stream.Ending {
	c.endPending()
	return stream.Ending{Err: firstError(c.errs)}
}

func (c choicesSource) Keeps() int { return c.g.RetainedBytes(c.reqs...) }

// endPending writes the finish of every choice a resume found with all its
// tokens produced before the cut.
func (c *choices) endPending() {
	for _, i := range c.pending {
		cw := c.writer(i)
		cw.finish(c.cs[i].EndProduced(cw).Finish)
		c.ended[i] = true
	}
	c.pending = c.pending[:0]
}

func (c *choices) writer(i int) *choiceWriter { return &choiceWriter{sw: c.sw, f: &c.formats[i]} }

// firstError is the first choice's error in index order.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// usage sums the choices' completion tokens; each prompt counts once,
// however many choices it had, with the cached tokens of its first
// submission.
func (c *choices) usage() Usage {
	var u Usage
	n := max(c.g.N, 1)
	for i := range c.cs {
		if i%n == 0 {
			u.PromptTokens += len(c.reqs[i].Prompt)
			u.CachedTokens += c.cached[i]
		}
		u.CompletionTokens += len(c.cs[i].Text.IDs())
		u.ReasoningTokens += c.cs[i].ReasoningTokens()
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// choicesGen is one connection's submission of the choices (nil: a choice
// not running on it). first: the response's first, whose outcomes give the
// cached prompt tokens.
type choicesGen struct {
	*choices
	gens  []*stream.Generation
	first bool
}

// Context is the one every choice of the submission shares.
func (g *choicesGen) Context() context.Context {
	for _, gen := range g.gens {
		if gen != nil {
			return gen.Context()
		}
	}
	return context.Background() // unreachable: Start and Continue hand out a running one
}

// Pump pumps the running choices into f, each finishing when it ends (a
// stream's finish chunk), and says how the response ended: cut short when
// the client's leaving cut any choice short (the rest then stay resumable),
// else with the first choice's error.
func (g *choicesGen) Pump(f httpedge.Framer, cfg stream.PumpConfig, drain <-chan struct{}) stream.Ending {
	if cf, ok := f.(*choicesFramer); !ok || cf.choices != g.choices {
		return stream.Ending{Err: errors.New("choices pumped into another response's framer")} // a driver bug: a 500
	}
	g.endPending()
	var cs []stream.ChoiceStream
	var idx []int
	for i, gen := range g.gens {
		if gen == nil {
			continue
		}
		c := &g.cs[i]
		c.Gen = gen
		c.Out, c.End = g.emitter(i)
		cs, idx = append(cs, *c), append(idx, i)
	}
	outs := stream.PumpChoices(cs, cfg, drain)
	var end stream.Ending
	for k, out := range outs {
		if g.first {
			g.cached[idx[k]] = out.Result.CachedTokens
		}
		end.CutShort = end.CutShort || out.CutShort
		end.ClientGone = end.ClientGone || out.ClientGone
	}
	if !end.CutShort {
		end.Err = firstError(g.errs)
	}
	return end
}

// emitter is choice i's emitter on this connection and what settles it
// when it ends: on a stream, its finish chunk, unless the client's leaving
// cut it short (it goes on where it stopped on a resume); in a whole
// response, its collector and finish reason.
func (c *choices) emitter(i int) (stream.ToolEmitter, func(stream.Outcome)) {
	if c.sw == nil {
		return &c.cols[i], func(out stream.Outcome) {
			c.finish[i], c.errs[i], c.ended[i] = out.Finish, out.Err, true
		}
	}
	cw := c.writer(i)
	if g := c.g; g.Echo && g.Logprobs && !g.Chat {
		n := max(g.N, 1)
		cw.echo = &choiceEcho{text: echoText(c.b, c.reqs[i]), prompt: c.reqs[i].Prompt,
			pl: c.reqs[i-i%n].PromptLogprobs, ts: c.cs[i].Text}
	}
	return cw, func(out stream.Outcome) {
		if out.CutShort {
			return
		}
		if out.Err == nil {
			cw.echoDue()
			cw.finish(out.Finish)
		}
		c.ended[i], c.errs[i] = true, out.Err
		_ = c.sw.Flush()
	}
}

// choicesFramer is the choices' httpedge.Framer. As an emitter it is
// choice 0's (the driver writes no text itself; the source writes each
// choice through its own).
type choicesFramer struct{ *choices }

// Attach implements httpedge.Framer.
func (f *choicesFramer) Attach(sse *httpedge.SSE) {
	f.sw = nil
	if sse != nil {
		f.sw = &sseWriter{SSE: sse, ctx: sse.Context(), format: &f.formats[0]}
	}
}

// Start implements httpedge.Framer: every choice's role chunk (chat) or
// echoed prompt (completions), so the client knows it was accepted.
func (f *choicesFramer) Start() {
	if f.sw == nil {
		return
	}
	g := f.g
	for i := range f.cs {
		cw := f.writer(i)
		switch {
		case g.Chat:
			cw.role()
			if text := chatEcho(g); g.Echo && text != "" { // echo.go
				_ = cw.Text(text, nil)
			}
		case g.Echo && g.Logprobs: // with the prompt's logprobs, due with the choice's first token (choiceWriter.echo)
		case g.Echo:
			_ = cw.Text(echoText(f.b, f.reqs[i]), nil)
		}
	}
}

// End implements httpedge.Framer: a stream's usage chunk, if asked, or its
// in-band error, then [DONE], once every choice has finished; a whole
// response's completion object.
func (f *choicesFramer) End(end stream.Ending) {
	if f.sw == nil {
		f.body = f.wholeBody()
		return
	}
	if end.Err != nil {
		f.sw.error(end.Err)
	} else if f.g.IncludeUsage {
		f.sw.usage(f.usage())
	}
	f.sw.done()
}

// Body implements httpedge.Framer.
func (f *choicesFramer) Body() []byte { return f.body }

func (f *choicesFramer) emitter0() stream.ToolEmitter {
	if f.sw == nil {
		return &f.cols[0]
	}
	return f.writer(0)
}

func (f *choicesFramer) Text(text string, ids []int32) error   { return f.emitter0().Text(text, ids) }
func (f *choicesFramer) ToolCall(d stream.ToolCallDelta) error { return f.emitter0().ToolCall(d) }
func (f *choicesFramer) KeepAlive() error                      { return f.emitter0().KeepAlive() }
func (f *choicesFramer) Flush() error                          { return f.emitter0().Flush() }

// wholeBody is the completion object once every choice has ended.
func (c *choices) wholeBody() []byte {
	g, b := c.g, c.b
	n := max(g.N, 1)
	id := c.reqs[0].ID
	var body *completionResponse
	var promptLPs []json.RawMessage // completions': one per choice, its prompt's
	for i := range c.cs {
		text := string(c.cols[i].text)
		switch {
		case g.Echo && g.Chat:
			text = chatEcho(g) + text
		case g.Echo:
			text = echoText(b, c.reqs[i]) + text
		}
		// The prompt's logprobs were computed once, by its first choice
		// (the group's leader); every choice of the prompt reports them.
		plps := promptLogprobsOf(c.reqs[i-i%n])
		one := c.cols[i].withToolCalls(completionBody(g.Chat, id, c.s.modelName(g.Model), text, c.finish[i], Usage{}))
		ch := one.Choices[0]
		ch.Index = i
		if m := ch.Message; m != nil {
			m.ReasoningContent, m.Reasoning = string(c.cols[i].reasoning), string(c.cols[i].reasoning)
		}
		lf := newLogprobFormat(b.Tokenizer, g) // its own: text_offset counts from the choice's start
		if ids := c.cs[i].Text.IDs(); g.Echo && !g.Chat && lf != nil && plps != nil {
			k := min(len(ids), len(c.cols[i].lps))
			ch.Logprobs = json.RawMessage(lf.appendEchoed(nil, c.reqs[i].Prompt, plps, ids[:k], c.cols[i].lps[:k]))
		} else {
			ch.Logprobs = c.cols[i].logprobsJSON(lf, ids)
		}
		if g.PromptLogprobs && (!g.Chat || i == 0) {
			promptLPs = append(promptLPs, promptLogprobsJSON(b, g, c.reqs[i].Prompt, plps))
		}
		if body == nil {
			body = one
			body.Choices = body.Choices[:0]
		}
		body.Choices = append(body.Choices, ch)
	}
	body.Usage = c.usage()
	out, _ := json.Marshal(withChoicesPromptLogprobs(g, body, promptLPs)) // always marshals
	return out
}

// promptLogprobsOf is the prompt logprobs req asked for, nil when it asked
// for none or they are not complete (its prefill failed, or a group's
// leader ended before computing them). Read once req's sequence delivered
// a token or ended.
func promptLogprobsOf(req engine.Request) []*engine.Logprob {
	pl := req.PromptLogprobs
	if pl == nil || len(pl.Logprobs) != len(req.Prompt) {
		return nil
	}
	for _, lp := range pl.Logprobs[1:] {
		if lp == nil {
			return nil
		}
	}
	return pl.Logprobs
}

// promptLogprobsJSON is vLLM's prompt_logprobs of prompt, null when they
// are missing.
func promptLogprobsJSON(b *stream.Backend, g *stream.GenRequest, prompt []int32, plps []*engine.Logprob) json.RawMessage {
	if plps == nil {
		return json.RawMessage("null")
	}
	return newTokenFormat(b.Tokenizer, g).appendPromptLogprobs(nil, prompt, plps, g.PromptTopLogprobs)
}

// withChoicesPromptLogprobs places prompt_logprobs where vLLM does: on chat
// once, beside the choices (its n choices share one prompt); on
// completions in every choice, its own prompt's.
func withChoicesPromptLogprobs(g *stream.GenRequest, body *completionResponse, lps []json.RawMessage) any {
	if !g.PromptLogprobs {
		return body
	}
	if g.Chat {
		return struct {
			*completionResponse
			PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
		}{body, lps[0]}
	}
	type choiceWith struct {
		choice
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	}
	cs := make([]choiceWith, len(body.Choices))
	for i, c := range body.Choices {
		cs[i] = choiceWith{c, lps[i]}
	}
	return struct {
		*completionResponse
		Choices []choiceWith `json:"choices"` // shadows the embedded choices
	}{body, cs}
}

// choiceCollector is one choice's Emitter in a whole response: its
// reasoning beside the collector's text, calls and logprobs.
type choiceCollector struct {
	collector
	reasoning []byte
}

// Reasoning implements stream.ReasoningEmitter.
func (c *choiceCollector) Reasoning(text string) error {
	c.reasoning = append(c.reasoning, text...)
	return nil
}

// withIndex is f for choice i: the same head with "index":i.
func (f chunkFormat) withIndex(i int) chunkFormat {
	const zero = `0,` // newChunkFormat's head ends with "index":0,
	head := append([]byte(nil), f.head[:len(f.head)-len(zero)]...)
	f.head = append(strconv.AppendInt(head, int64(i), 10), ',')
	return f
}

// choiceWriter is one choice's Emitter: the stream's one sseWriter, framing
// with the choice's format (its index, its logprobs' offsets). PumpChoices
// serializes the choices' calls, so switching the format is safe.
type choiceWriter struct {
	sw   *sseWriter
	f    *chunkFormat
	echo *choiceEcho // completions' echo with logprobs, sent before the choice's first token
}

// choiceEcho is a streamed completion choice's echoed prompt with its
// logprobs. The prompt's logprobs are computed by its first choice, the
// leader of the group the engine prefills once (stream.GroupEngine),
// before any of the group's choices has a token, so they are complete
// once this choice has one.
type choiceEcho struct {
	text   string
	prompt []int32
	pl     *engine.PromptLogprobs
	ts     *stream.TextStream // the choice's: whether a token was sent yet
}

func (c *choiceWriter) use() *sseWriter {
	c.sw.format = c.f
	return c.sw
}

// echoDue sends the echo chunk when the choice has not sent one: before
// its first token, or at its end when it produced none. Whether it was
// sent is read off the choice's own tokens, so a resumed stream, whose
// earlier tokens the TextStream holds, never sends it twice.
func (c *choiceWriter) echoDue(ids ...int32) {
	if c.echo == nil || len(c.echo.ts.IDs()) != len(ids) {
		return
	}
	sw := c.use()
	plps := promptLogprobsOf(engine.Request{Prompt: c.echo.prompt, PromptLogprobs: c.echo.pl})
	if plps == nil || c.f.lp == nil {
		sw.payload = c.f.content(sw.payload[:0], c.echo.text)
		sw.event(sw.payload)
		return
	}
	dst := append(sw.payload[:0], c.f.head...)
	dst = append(dst, c.f.openText...)
	dst = appendJSONString(dst, c.echo.text)
	dst = append(dst, `,"logprobs":`...)
	dst = c.f.lp.appendEchoed(dst, c.echo.prompt, plps, nil, nil)
	sw.payload = append(dst, `,"finish_reason":null}]}`...)
	sw.event(sw.payload)
}

func (c *choiceWriter) Text(text string, ids []int32) error {
	if len(ids) > 0 {
		c.echoDue(ids...)
	}
	return c.use().Text(text, ids)
}
func (c *choiceWriter) Logprobs(lps []engine.Logprob)         { c.use().Logprobs(lps) }
func (c *choiceWriter) ToolCall(d stream.ToolCallDelta) error { return c.use().ToolCall(d) }
func (c *choiceWriter) Reasoning(text string) error           { return c.use().Reasoning(text) }
func (c *choiceWriter) KeepAlive() error                      { return c.sw.KeepAlive() }
func (c *choiceWriter) Flush() error                          { return c.sw.Flush() }
func (c *choiceWriter) role()                                 { c.use().role() }
func (c *choiceWriter) finish(reason string)                  { c.use().finish(reason) }

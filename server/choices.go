package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// generateChoices serves a request for several choices: n > 1, or a
// completions list of prompts, or both (choice index = prompt*n + j, as
// OpenAI numbers them). The stream core prefills each prompt once for its
// n choices and pumps them all at once (stream/choices.go); this adapter
// only frames them. A stream is retained for a resume as a single choice's
// is (choicesState, resume.go).
func (s *Server) generateChoices(w http.ResponseWriter, r *http.Request, b *stream.Backend, g *stream.GenRequest) {
	reqs, err := stream.PrepareChoices(b, g)
	if err != nil {
		writeError(w, err)
		return
	}
	id := responseID(g.Chat)
	for i := range reqs {
		reqs[i].ID = id
	}
	if g.Stream {
		s.streamChoices(w, r, b, g, id, reqs)
		return
	}
	gens, err := b.SubmitChoices(r.Context(), reqs, max(g.N, 1))
	if err != nil {
		writeError(w, err)
		return
	}
	cs := make([]stream.ChoiceStream, len(gens))
	for i, gen := range gens {
		cs[i] = stream.NewChoiceStream(b, g, reqs[i].Prompt)
		cs[i].Gen = gen
	}
	s.completeChoices(w, b, g, id, reqs, cs)
}

// streamChoices streams every choice's chunks interleaved as they come, each
// choice's finish chunk when it ends; then the usage chunk, if asked, and
// [DONE] once all have. Every event goes through the stream's log, so a
// client cut mid-stream can resume it (resumeChoices).
func (s *Server) streamChoices(w http.ResponseWriter, r *http.Request, b *stream.Backend, g *stream.GenRequest, id string, reqs []engine.Request) {
	retain := 0
	if s.store != nil {
		retain = s.cfg.ResumeStreamBytes
	}
	st := newChoicesState(id, g, reqs, newChunkFormat(g.Chat, id, s.modelName(g.Model), time.Now().Unix()), b, httpedge.NewEventLog(retain))
	if g.ContinuousUsage {
		// vLLM's per-choice figures: the choice's prompt and its tokens so far.
		for i := range st.formats {
			st.formats[i].soFar = func() Usage {
				p, c := len(reqs[i].Prompt), len(st.cs[i].Text.IDs())
				return Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
			}
		}
	}
	ctx, release, err := st.Acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	gens, err := b.SubmitChoices(ctx, reqs, max(g.N, 1))
	if err != nil {
		writeError(w, err)
		return
	}
	if s.store != nil {
		s.store.Add(st)
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(gens[0].Context(), w, st.Log, &st.formats[0], s.cfg.WriteTimeout, 0)
	for i := range st.cs {
		cw := &choiceWriter{sw: sw, f: &st.formats[i]}
		switch {
		case g.Chat:
			cw.role()
			if text := chatEcho(g); g.Echo && text != "" { // echo.go
				_ = cw.Text(text, nil)
			}
		case g.Echo && g.Logprobs: // with the prompt's logprobs, due with the choice's first token (choiceWriter.echo)
		case g.Echo:
			_ = cw.Text(echoText(b, reqs[i]), nil)
		}
	}
	_ = sw.Flush() // headers and roles now: the client knows it was accepted
	s.pumpChoices(st, gens, sw, true)
}

// pumpChoices pumps the choices gens holds (nil: not running) into sw and,
// once every choice has ended, ends the stream; a choice the client's
// leaving cut short leaves the stream resumable instead. first is the
// stream's first connection, whose outcomes give the cached prompt tokens.
func (s *Server) pumpChoices(st *choicesState, gens []*stream.Generation, sw *sseWriter, first bool) {
	var cs []stream.ChoiceStream
	var idx []int
	for i, gen := range gens {
		if gen == nil {
			continue
		}
		c := &st.cs[i]
		c.Gen = gen
		cw := &choiceWriter{sw: sw, f: &st.formats[i]}
		if g := st.gen; g.Echo && g.Logprobs && !g.Chat {
			n := max(g.N, 1)
			cw.echo = &choiceEcho{text: echoText(s.backend.Load(), st.reqs[i]), prompt: st.reqs[i].Prompt,
				pl: st.reqs[i-i%n].PromptLogprobs, ts: c.Text}
		}
		c.Out = cw
		c.End = func(out stream.Outcome) {
			if out.CutShort {
				return // resumable: the choice goes on where it stopped
			}
			if out.Err == nil {
				cw.echoDue()
				cw.finish(out.Finish)
			}
			st.ended[i], st.errs[i] = true, out.Err
			_ = sw.Flush()
		}
		cs, idx = append(cs, *c), append(idx, i)
	}
	outs := stream.PumpChoices(cs, s.pumpConfig(true), s.drain)
	for k, out := range outs {
		if first {
			st.cached[idx[k]] = out.Result.CachedTokens
		}
		if out.CutShort {
			return // every choice has ended and freed its blocks; nobody reads on
		}
	}
	for _, ended := range st.ended {
		if !ended {
			return
		}
	}
	if err := firstError(outsOf(st.errs)); err != nil {
		sw.error(err)
	} else if st.gen.IncludeUsage {
		sw.usage(st.usage())
	}
	sw.done()
	st.done = true
	_ = sw.Flush()
}

func outsOf(errs []error) []stream.Outcome {
	outs := make([]stream.Outcome, len(errs))
	for i, err := range errs {
		outs[i].Err = err
	}
	return outs
}

// completeChoices answers with every choice once all have ended.
func (s *Server) completeChoices(w http.ResponseWriter, b *stream.Backend, g *stream.GenRequest, id string, reqs []engine.Request, cs []stream.ChoiceStream) {
	cols := make([]choiceCollector, len(cs))
	for i := range cs {
		cs[i].Out = &cols[i]
	}
	outs := stream.PumpChoices(cs, s.pumpConfig(false), s.drain)
	for _, out := range outs {
		if out.ClientGone {
			return
		}
	}
	if err := firstError(outs); err != nil {
		writeError(w, err)
		return
	}
	n := max(g.N, 1)
	var body *completionResponse
	var promptLPs []json.RawMessage // completions': one per choice, its prompt's
	for i := range cs {
		text := string(cols[i].text)
		switch {
		case g.Echo && g.Chat:
			text = chatEcho(g) + text
		case g.Echo:
			text = echoText(b, reqs[i]) + text
		}
		// The prompt's logprobs were computed once, by its first choice
		// (the group's leader); every choice of the prompt reports them.
		plps := promptLogprobsOf(reqs[i-i%n])
		one := cols[i].withToolCalls(completionBody(g.Chat, id, s.modelName(g.Model), text, outs[i].Finish, Usage{}))
		c := one.Choices[0]
		c.Index = i
		if m := c.Message; m != nil {
			m.ReasoningContent, m.Reasoning = string(cols[i].reasoning), string(cols[i].reasoning)
		}
		lf := newLogprobFormat(b.Tokenizer, g) // its own: text_offset counts from the choice's start
		if ids := cs[i].Text.IDs(); g.Echo && !g.Chat && lf != nil && plps != nil {
			k := min(len(ids), len(cols[i].lps))
			c.Logprobs = json.RawMessage(lf.appendEchoed(nil, reqs[i].Prompt, plps, ids[:k], cols[i].lps[:k]))
		} else {
			c.Logprobs = cols[i].logprobsJSON(lf, ids)
		}
		if g.PromptLogprobs && (!g.Chat || i == 0) {
			promptLPs = append(promptLPs, promptLogprobsJSON(b, g, reqs[i].Prompt, plps))
		}
		if body == nil {
			body = one
			body.Choices = body.Choices[:0]
		}
		body.Choices = append(body.Choices, c)
	}
	body.Usage = choicesUsage(g, reqs, cs, outs)
	writeJSON(w, withChoicesPromptLogprobs(g, body, promptLPs))
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

// choicesUsage sums the choices' completion tokens; each prompt counts once,
// however many choices it had.
func choicesUsage(g *stream.GenRequest, reqs []engine.Request, cs []stream.ChoiceStream, outs []stream.Outcome) Usage {
	var u Usage
	n := max(g.N, 1)
	for i := range cs {
		if i%n == 0 {
			u.PromptTokens += len(reqs[i].Prompt)
			u.CachedTokens += outs[i].Result.CachedTokens
		}
		u.CompletionTokens += len(cs[i].Text.IDs())
		u.ReasoningTokens += cs[i].ReasoningTokens()
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func firstError(outs []stream.Outcome) error {
	for _, out := range outs {
		if out.Err != nil {
			return out.Err
		}
	}
	return nil
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

package server

import (
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
		if g.Chat {
			cw.role()
		} else if g.Echo {
			_ = cw.Text(echoText(b, reqs[i]), nil) // echo.go
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
		c.Out = cw
		c.End = func(out stream.Outcome) {
			if out.CutShort {
				return // resumable: the choice goes on where it stopped
			}
			if out.Err == nil {
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
	var body *completionResponse
	for i := range cs {
		text := string(cols[i].text)
		if g.Echo {
			text = echoText(b, reqs[i]) + text
		}
		one := cols[i].withToolCalls(completionBody(g.Chat, id, s.modelName(g.Model), text, outs[i].Finish, Usage{}))
		c := one.Choices[0]
		c.Index = i
		if m := c.Message; m != nil {
			m.ReasoningContent, m.Reasoning = string(cols[i].reasoning), string(cols[i].reasoning)
		}
		c.Logprobs = cols[i].logprobsJSON(newLogprobFormat(b.Tokenizer, g), cs[i].Text.IDs())
		if body == nil {
			body = one
			body.Choices = body.Choices[:0]
		}
		body.Choices = append(body.Choices, c)
	}
	body.Usage = choicesUsage(g, reqs, cs, outs)
	writeJSON(w, body)
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
	sw *sseWriter
	f  *chunkFormat
}

func (c *choiceWriter) use() *sseWriter {
	c.sw.format = c.f
	return c.sw
}

func (c *choiceWriter) Text(text string, ids []int32) error   { return c.use().Text(text, ids) }
func (c *choiceWriter) Logprobs(lps []engine.Logprob)         { c.use().Logprobs(lps) }
func (c *choiceWriter) ToolCall(d stream.ToolCallDelta) error { return c.use().ToolCall(d) }
func (c *choiceWriter) Reasoning(text string) error           { return c.use().Reasoning(text) }
func (c *choiceWriter) KeepAlive() error                      { return c.sw.KeepAlive() }
func (c *choiceWriter) Flush() error                          { return c.sw.Flush() }
func (c *choiceWriter) role()                                 { c.use().role() }
func (c *choiceWriter) finish(reason string)                  { c.use().finish(reason) }

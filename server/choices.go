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
// only frames them. Such a stream is not retained for a resume: reconnecting
// would have to restart every choice where its own client view left off.
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
	gens, err := stream.SubmitChoices(r.Context(), b.Engine, reqs, max(g.N, 1), s.cfg.AbortOnDisconnect)
	if err != nil {
		writeError(w, err)
		return
	}
	cs := make([]stream.ChoiceStream, len(gens))
	for i, gen := range gens {
		cs[i] = stream.ChoiceStream{Gen: gen, Tools: stream.NewToolStream(g),
			Text: stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, reqs[i].Prompt), g.Stop)}
	}
	if g.Stream {
		s.streamChoices(w, b, g, id, reqs, cs)
	} else {
		s.completeChoices(w, b, g, id, reqs, cs)
	}
}

// streamChoices streams every choice's chunks interleaved as they come, each
// choice's finish chunk when it ends; then the usage chunk, if asked, and
// [DONE] once all have.
func (s *Server) streamChoices(w http.ResponseWriter, b *stream.Backend, g *stream.GenRequest, id string, reqs []engine.Request, cs []stream.ChoiceStream) {
	base := newChunkFormat(g.Chat, id, s.modelName(g.Model), time.Now().Unix())
	formats := make([]chunkFormat, len(cs))
	httpedge.SetHeaders(w, nil) // no stream id: nothing is retained to resume
	sw := newSSEWriter(cs[0].Gen.Context(), w, httpedge.NewEventLog(0), &formats[0], s.cfg.WriteTimeout, 0)
	for i := range cs {
		formats[i] = base.withIndex(i)
		formats[i].lp = newLogprobFormat(b.Tokenizer, g)
		cw := &choiceWriter{sw: sw, f: &formats[i]}
		cs[i].Out = cw
		cs[i].End = func(out stream.Outcome) {
			if out.Err == nil && !out.ClientGone {
				cw.finish(out.Finish)
				_ = sw.Flush()
			}
		}
		if g.Chat {
			cw.role()
		} else if g.Echo {
			_ = cw.Text(echoText(b, reqs[i]), nil) // echo.go
		}
	}
	_ = sw.Flush() // headers and roles now: the client knows it was accepted
	outs := stream.PumpChoices(cs, s.pumpConfig(true), s.drain)
	for _, out := range outs {
		if out.ClientGone {
			return // every choice has ended and freed its blocks; nobody reads on
		}
	}
	if err := firstError(outs); err != nil {
		sw.error(err)
	} else if g.IncludeUsage {
		sw.usage(choicesUsage(g, reqs, cs, outs))
	}
	sw.done()
	_ = sw.Flush()
}

// completeChoices answers with every choice once all have ended.
func (s *Server) completeChoices(w http.ResponseWriter, b *stream.Backend, g *stream.GenRequest, id string, reqs []engine.Request, cs []stream.ChoiceStream) {
	cols := make([]collector, len(cs))
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
func (c *choiceWriter) KeepAlive() error                      { return c.sw.KeepAlive() }
func (c *choiceWriter) Flush() error                          { return c.sw.Flush() }
func (c *choiceWriter) role()                                 { c.use().role() }
func (c *choiceWriter) finish(reason string)                  { c.use().finish(reason) }

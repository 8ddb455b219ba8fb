package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// handleGenerate serves POST /v1/chat/completions and /v1/completions. The
// same POST carrying X-Sluice-Stream-Id and Last-Event-ID resumes a stream.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	if id := r.Header.Get(streamIDHeader); id != "" && r.Header.Get(lastEventIDHeader) != "" {
		s.resume(w, r, id)
		return
	}
	b := s.backend.Load()
	if b == nil {
		writeError(w, fmt.Errorf("%w: model still loading", engine.ErrClosed))
		return
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := ParseRequest(body, chat)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := stream.CheckModel(g.Model, s.cfg.ModelID, s.cfg.Aliases); err != nil {
		writeError(w, err)
		return
	}
	if g.NumChoices() > 1 {
		s.generateChoices(w, r, b, g) // choices.go
		return
	}
	req, err := stream.Prepare(b, g)
	if err != nil {
		writeError(w, err)
		return
	}
	if g.Stream {
		s.stream(w, r, b, g, req)
	} else {
		s.complete(w, r, b, g, req)
	}
}

func (s *Server) pumpConfig(streaming bool) stream.PumpConfig {
	pc := stream.PumpConfig{StallTimeout: s.cfg.StallTimeout}
	if streaming {
		pc.FlushInterval, pc.KeepAlive = s.cfg.FlushInterval, s.cfg.KeepAlive
	}
	return pc
}

// stream serves a streaming response: role chunk, content chunks, finish
// chunk, optional usage chunk, [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, b *stream.Backend, g *stream.GenRequest, req engine.Request) {
	id := responseID(g.Chat)
	req.ID = id
	f := newChunkFormat(g.Chat, id, s.modelName(g.Model), time.Now().Unix())
	f.lp = newLogprobFormat(b.Tokenizer, g)
	retain := 0
	if s.store != nil {
		retain = s.cfg.ResumeStreamBytes
	}
	st := newStreamState(id, g, req, f, stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop), httpedge.NewEventLog(retain))
	ctx, release, err := st.acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	gen, err := b.Submit(ctx, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.store != nil {
		s.store.add(st)
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(gen.Context(), w, st.log, &st.format, s.cfg.WriteTimeout, 0)
	if g.Chat {
		sw.role()
	} else if g.Echo {
		_ = sw.Text(echoText(b, req), nil) // echo.go
	}
	_ = sw.Flush() // headers and role now: the client knows it was accepted
	s.pumpStream(st, gen, sw)
}

// pumpStream drains gen into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (s *Server) pumpStream(st *streamState, gen *stream.Generation, sw *sseWriter) {
	out := st.tools.End(stream.Pump(gen, st.ts, st.tools.Use(sw), s.pumpConfig(true), s.drain))
	if st.cached == 0 {
		st.cached = out.Result.CachedTokens
	}
	if out.CutShort {
		return
	}
	s.endStream(st, sw, out)
}

// endStream writes the stream's last events: finish chunk and usage chunk, or
// the in-band error; then [DONE].
func (s *Server) endStream(st *streamState, sw *sseWriter, out stream.Outcome) {
	if out.Err != nil {
		sw.error(out.Err)
	} else {
		sw.finish(out.Finish)
		if st.gen.IncludeUsage {
			sw.usage(st.usage())
		}
	}
	sw.done()
	st.done = true
	_ = sw.Flush()
}

func (st *streamState) usage() Usage {
	n := len(st.ts.IDs())
	return Usage{PromptTokens: len(st.req.Prompt), CompletionTokens: n, TotalTokens: len(st.req.Prompt) + n, CachedTokens: st.cached}
}

func (s *Server) handleStreamGet(w http.ResponseWriter, r *http.Request) {
	s.resume(w, r, r.PathValue("id"))
}

// openResume finds the retained stream id names (one the relay produced,
// with relayed), reads Last-Event-ID, takes the stream for this reader and
// checks the log still holds what follows that id. ok is false when it has
// answered the request itself; otherwise the caller calls release.
func (s *Server) openResume(w http.ResponseWriter, r *http.Request, id string, relayed bool) (
	st *streamState, last int64, ctx context.Context, release func(), ok bool) {
	rc, err := s.store.shared().Open(r, id, func(o httpedge.Resumable) bool {
		st, ok := o.(*streamState)
		return ok && (!relayed || st.relay != nil)
	})
	if err != nil {
		if r.Context().Err() == nil { // else the client left while waiting for the stream
			writeError(w, err)
		}
		return nil, 0, nil, nil, false
	}
	return rc.State.(*streamState), rc.Last, rc.Ctx, rc.Release, true
}

// resume replays the events after Last-Event-ID and, when the generation was
// cut short by a disconnect, continues it from the tokens already produced.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, id string) {
	if s.store != nil {
		if _, ok := s.store.Get(id).(*choicesState); ok {
			s.resumeChoices(w, r, id) // resume.go
			return
		}
	}
	st, last, ctx, release, ok := s.openResume(w, r, id, false)
	if !ok {
		return
	}
	defer release()
	// The abort can race the last token: a stream cut with every token
	// already produced only lacks its ending (Continue gives no generation).
	var gen *stream.Generation
	if !st.done {
		var err error
		if gen, err = stream.Continue(ctx, s.backend.Load(), st.gen, st.req, st.ts.IDs()); err != nil {
			writeError(w, err)
			return
		}
		if gen != nil {
			ctx = gen.Context()
		}
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.log, &st.format, s.cfg.WriteTimeout, last)
	_ = sw.Flush() // the replay
	switch {
	case gen != nil:
		s.pumpStream(st, gen, sw)
	case !st.done: // every token was produced before the cut
		_ = st.tools.Use(sw).Text(st.ts.Finish(), nil)
		s.endStream(st, sw, st.tools.End(stream.Outcome{Finish: "length"}))
	}
}

// collector is the Emitter of a non-streaming response.
type collector struct {
	text  []byte
	calls []toolCallJSON   // toolcalls.go
	lps   []engine.Logprob // logprobs.go: one per id of the TextStream
}

func (c *collector) Text(s string, _ []int32) error { c.text = append(c.text, s...); return nil }
func (c *collector) KeepAlive() error               { return nil }
func (c *collector) Flush() error                   { return nil }

// complete serves a non-streaming response.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, b *stream.Backend, g *stream.GenRequest, req engine.Request) {
	id := responseID(g.Chat)
	req.ID = id
	gen, err := b.Submit(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	var c collector
	ts := stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)
	tools := stream.NewToolStream(g)
	out := tools.End(stream.Pump(gen, ts, tools.Use(&c), s.pumpConfig(false), s.drain))
	if out.ClientGone {
		return
	}
	if out.Err != nil {
		writeError(w, out.Err)
		return
	}
	n := len(ts.IDs())
	u := Usage{PromptTokens: len(req.Prompt), CompletionTokens: n, TotalTokens: len(req.Prompt) + n, CachedTokens: out.Result.CachedTokens}
	text := string(c.text)
	if g.Echo {
		text = echoText(b, req) + text
	}
	body := c.withToolCalls(completionBody(g.Chat, id, s.modelName(g.Model), text, out.Finish, u))
	body.Choices[0].Logprobs = c.logprobsJSON(newLogprobFormat(b.Tokenizer, g), ts.IDs())
	writeJSON(w, body)
}

// responseID is the id of a chat.completion or text_completion response.
func responseID(chat bool) string {
	if chat {
		return stream.NewID("chatcmpl-")
	}
	return stream.NewID("cmpl-")
}

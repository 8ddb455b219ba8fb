package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
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
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := ParseRequest(body, chat)
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.cfg.servesModel(g.Model) {
		writeError(w, fmt.Errorf("%w: %q (this server serves %q)", ErrModelNotFound, g.Model, s.cfg.ModelID))
		return
	}
	req, err := s.engineRequest(b, g)
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

// engineRequest tokenizes the prompt and checks it against the context.
func (s *Server) engineRequest(b *Backend, g *GenRequest) (engine.Request, error) {
	prompt := g.PromptIDs
	if prompt == nil {
		text, addSpecial := g.Prompt, true
		if g.Chat {
			var err error
			if text, err = b.Tokenizer.ChatPrompt(g.Messages); err != nil {
				return engine.Request{}, invalidParam("messages", "applying the chat template: %v", err)
			}
			addSpecial = false // the template writes any BOS itself
		}
		var err error
		if prompt, err = b.Tokenizer.Encode(text, addSpecial); err != nil {
			return engine.Request{}, invalidParam("prompt", "tokenizing: %v", err)
		}
	}
	param := "messages"
	if !g.Chat {
		param = "prompt"
	}
	switch n := len(prompt); {
	case n == 0:
		return engine.Request{}, invalidParam(param, "the prompt is empty after tokenization")
	case n >= b.ContextLen:
		return engine.Request{}, invalidParam(param, "the prompt is %d tokens long; the model's context is %d tokens", n, b.ContextLen)
	case g.MaxTokens > 0 && n+g.MaxTokens > b.ContextLen:
		return engine.Request{}, invalidParam("max_tokens",
			"the model's context is %d tokens; the prompt (%d tokens) plus max_tokens (%d) exceed it", b.ContextLen, n, g.MaxTokens)
	}
	sp := g.Sampling
	if sp.Seed == nil {
		// Fixed here, not in the engine, so a resumed generation samples
		// exactly as the interrupted one would have.
		seed := randUint64()
		sp.Seed = &seed
	}
	return engine.Request{Prompt: prompt, MaxTokens: g.MaxTokens, Sampling: sp}, nil
}

func (s *Server) pumpConfig(stream bool) PumpConfig {
	pc := PumpConfig{StallTimeout: s.cfg.StallTimeout, AbortOnDisconnect: s.cfg.AbortOnDisconnect}
	if stream {
		pc.FlushInterval, pc.KeepAlive = s.cfg.FlushInterval, s.cfg.KeepAlive
	}
	return pc
}

// submit hands req to the engine. With AbortOnDisconnect off the engine must
// not see the client's cancellation either (the benchmark's naive mode).
func (s *Server) submit(ctx context.Context, b *Backend, req engine.Request) (Sequence, error) {
	if !s.cfg.AbortOnDisconnect {
		ctx = context.WithoutCancel(ctx)
	}
	seq, err := b.Engine.Submit(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	return seq, nil
}

// stream serves a streaming response: role chunk, content chunks, finish
// chunk, optional usage chunk, [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, b *Backend, g *GenRequest, req engine.Request) {
	prefix := "cmpl-"
	if g.Chat {
		prefix = "chatcmpl-"
	}
	id := prefix + randID()
	req.ID = id
	f := newChunkFormat(g.Chat, id, s.modelName(g.Model), time.Now().Unix())
	retain := 0
	if s.store != nil {
		retain = s.cfg.ResumeStreamBytes
	}
	st := newStreamState(id, g, req, f, NewTextStream(NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop), newEventLog(retain))
	ctx, release, err := st.acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	seq, err := s.submit(ctx, b, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.store != nil {
		s.store.add(st)
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.log, &st.format, s.cfg.WriteTimeout, 0)
	if g.Chat {
		sw.role()
	}
	_ = sw.Flush() // headers and role now: the client knows it was accepted
	s.pumpStream(ctx, st, seq, sw)
}

// pumpStream drains seq into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (s *Server) pumpStream(ctx context.Context, st *streamState, seq Sequence, sw *sseWriter) {
	out := Pump(ctx, seq, st.ts, sw, s.pumpConfig(true), s.drain)
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
func (s *Server) endStream(st *streamState, sw *sseWriter, out Outcome) {
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

// resume replays the events after Last-Event-ID and, when the generation was
// cut short by a disconnect, continues it from the tokens already produced.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, id string) {
	var st *streamState
	if s.store != nil {
		st = s.store.get(id)
	}
	if st == nil {
		writeError(w, fmt.Errorf("%w: %q", ErrStreamNotFound, id))
		return
	}
	var last int64
	if h := r.Header.Get(lastEventIDHeader); h != "" {
		var err error
		if last, err = strconv.ParseInt(h, 10, 64); err != nil || last < 0 {
			writeError(w, invalidParam(lastEventIDHeader, "Last-Event-ID must be an event id, got %q", h))
			return
		}
	}
	ctx, release, err := st.acquire(r.Context())
	if err != nil {
		return
	}
	defer release()
	if _, err := st.log.after(last); err != nil {
		writeError(w, err)
		return
	}
	// The abort can race the last token: a stream cut with every token
	// already produced only lacks its ending.
	limitReached := st.req.MaxTokens > 0 && len(st.ts.IDs()) >= st.req.MaxTokens
	var seq Sequence
	if !st.done && !limitReached {
		req := st.req
		req.Resume = append([]int32(nil), st.ts.IDs()...)
		if seq, err = s.submit(ctx, s.backend.Load(), req); err != nil {
			writeError(w, err)
			return
		}
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.log, &st.format, s.cfg.WriteTimeout, last)
	_ = sw.Flush() // the replay
	switch {
	case seq != nil:
		s.pumpStream(ctx, st, seq, sw)
	case !st.done: // limitReached
		if text := st.ts.Finish(); text != "" {
			_ = sw.Text(text)
		}
		s.endStream(st, sw, Outcome{Finish: "length"})
	}
}

// collector is the Emitter of a non-streaming response.
type collector struct{ text []byte }

func (c *collector) Text(s string) error { c.text = append(c.text, s...); return nil }
func (c *collector) KeepAlive() error    { return nil }
func (c *collector) Flush() error        { return nil }

// complete serves a non-streaming response.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, b *Backend, g *GenRequest, req engine.Request) {
	id := "cmpl-" + randID()
	if g.Chat {
		id = "chatcmpl-" + randID()
	}
	req.ID = id
	seq, err := s.submit(r.Context(), b, req)
	if err != nil {
		writeError(w, err)
		return
	}
	var c collector
	ts := NewTextStream(NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)
	out := Pump(r.Context(), seq, ts, &c, s.pumpConfig(false), s.drain)
	if out.ClientGone {
		return
	}
	if out.Err != nil {
		writeError(w, out.Err)
		return
	}
	n := len(ts.IDs())
	u := Usage{PromptTokens: len(req.Prompt), CompletionTokens: n, TotalTokens: len(req.Prompt) + n, CachedTokens: out.Result.CachedTokens}
	writeJSON(w, completionBody(g.Chat, id, s.modelName(g.Model), string(c.text), out.Finish, u))
}

func randID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%x", b)
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

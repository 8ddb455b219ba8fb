package grpcserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/engine"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// inference implements sluice.v1.Inference.
type inference struct {
	sluicev1.UnimplementedInferenceServer
	s *Server
}

func (x *inference) Generate(r *sluicev1.GenerateRequest, call grpc.ServerStreamingServer[sluicev1.GenerateResponse]) error {
	s := x.s
	g, err := genRequest(r)
	if err != nil {
		return toStatus(err)
	}
	if g.N > 1 {
		return x.generateChoices(r, call, g) // choices.go
	}
	run, err := s.start(call.Context(), g, r.GetRequestId(), "gen-")
	if err != nil {
		return err
	}
	defer run.done()
	id := run.req.ID
	tok := run.backend.Tokenizer
	send := func(p *piece) error {
		return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Chunk{
			Chunk: chunk(p, tok)}})
	}
	complete := func(out stream.Outcome, finish string) error {
		usage := &sluicev1.Usage{PromptTokens: uint32(len(run.req.Prompt)), CompletionTokens: uint32(len(run.ts.IDs())),
			CachedTokens: uint32(out.Result.CachedTokens), ReasoningTokens: uint32(out.ReasoningTokens)}
		return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Complete{
			Complete: &sluicev1.GenerateComplete{FinishReason: finish, Usage: usage}}})
	}
	sendErr := func(err error, code codes.Code, httpStatus int) {
		_ = call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Error{
			Error: &sluicev1.GenerateError{Code: code.String(), Message: err.Error(), HttpStatus: uint32(httpStatus)}}})
	}
	return s.stream(run, true, send, complete, sendErr)
}

func (x *inference) Abort(ctx context.Context, r *sluicev1.AbortRequest) (*sluicev1.AbortResponse, error) {
	if err := x.s.inflight.abort(ctx, r.GetRequestId()); err != nil {
		return nil, toStatus(err)
	}
	return &sluicev1.AbortResponse{}, nil
}

func (x *inference) Tokenize(_ context.Context, r *sluicev1.TokenizeRequest) (*sluicev1.TokenizeResponse, error) {
	b, err := x.s.backendFor(r.GetModel())
	if err != nil {
		return nil, err
	}
	// Through stream.TokenizePrompt, as HTTP's /tokenize: the same size
	// limits before any rendering, message text as plain text, NUL kept and
	// an unencodable character refused.
	var ids []int32
	switch in := r.GetInput().(type) {
	case *sluicev1.TokenizeRequest_Text:
		addSpecial := r.AddSpecialTokens == nil || r.GetAddSpecialTokens()
		ids, err = stream.TokenizePrompt(b, &stream.GenRequest{Prompt: in.Text}, addSpecial)
	case *sluicev1.TokenizeRequest_Chat:
		var msgs []stream.ChatMessage
		if msgs, err = chatMessages(in.Chat.GetMessages()); err != nil {
			return nil, toStatus(err)
		}
		// The kwargs as Generate takes them, so the ids are the prompt a
		// generation with the same chat is given (enable_thinking false
		// can end it).
		var g stream.GenRequest
		var kwargs map[string]json.RawMessage
		if err = g.SetMessages(msgs); err == nil {
			kwargs, err = setTemplateKwargs(&g, in.Chat.GetChatTemplateKwargs())
		}
		if err == nil {
			err = setReasoning(&g, nil, kwargs)
		}
		if err == nil {
			ids, err = stream.TokenizePrompt(b, &g, false)
		}
	default:
		err = fmt.Errorf("%w: input: text or chat is required", engine.ErrInvalidRequest)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &sluicev1.TokenizeResponse{TokenIds: uint32s(ids), ContextLength: uint32(b.ContextLen)}, nil
}

func (x *inference) Detokenize(_ context.Context, r *sluicev1.DetokenizeRequest) (*sluicev1.DetokenizeResponse, error) {
	b, err := x.s.backendFor(r.GetModel())
	if err != nil {
		return nil, err
	}
	ids, err := int32s("token_ids", r.GetTokenIds())
	if err != nil {
		return nil, toStatus(err)
	}
	// The stream decoder is the only decoder the server's Tokenizer offers;
	// fed every id and flushed it yields the whole text.
	dec := b.Tokenizer.NewDetokenizer()
	var text strings.Builder
	for _, id := range ids {
		text.WriteString(dec.Add(id))
	}
	text.WriteString(dec.Flush())
	return &sluicev1.DetokenizeResponse{Text: text.String()}, nil
}

func (x *inference) ListModels(context.Context, *sluicev1.ListModelsRequest) (*sluicev1.ListModelsResponse, error) {
	m := &sluicev1.Model{Id: x.s.cfg.HTTP.ModelID, Aliases: x.s.cfg.HTTP.Aliases, OwnedBy: "sluice"}
	if loaded := x.s.model.Load(); loaded != nil {
		m.ContextLength = uint32(loaded.backend.ContextLen)
	}
	return &sluicev1.ListModelsResponse{Models: []*sluicev1.Model{m}}, nil
}

// piece is what one response message carries: text, the ids of every token
// consumed with it, their logprobs when asked, and tool-call deltas, which
// follow the text.
type piece struct {
	reasoning string // before text
	text      string
	ids       []int32
	lps       []engine.Logprob
	calls     []stream.ToolCallDelta
}

// chunkEmitter is the Pump's Emitter for gRPC (a stream.ToolEmitter and a
// stream.LogprobEmitter): Text and ToolCall buffer, Flush sends one message
// per buffered piece, in order. Text after a tool call starts a new piece,
// so a message's text always precedes its calls. After a failed send every
// Flush returns that error.
type chunkEmitter struct {
	send   func(p *piece) error
	pieces []piece
	lps    []engine.Logprob // from Logprobs, waiting for the next Text's ids
	err    error
}

func (e *chunkEmitter) last(newIf func(*piece) bool) *piece {
	if n := len(e.pieces); n > 0 && !newIf(&e.pieces[n-1]) {
		return &e.pieces[n-1]
	}
	e.pieces = append(e.pieces, piece{})
	return &e.pieces[len(e.pieces)-1]
}

func (e *chunkEmitter) Text(s string, ids []int32) error {
	p := e.last(func(p *piece) bool { return s != "" && len(p.calls) > 0 })
	p.text += s
	p.ids = append(p.ids, ids...)
	n := min(len(ids), len(e.lps)) // Pump gives one per id; a request without logprobs gives none
	p.lps = append(p.lps, e.lps[:n]...)
	e.lps = e.lps[n:]
	return nil
}

// Reasoning implements stream.ReasoningEmitter. Reasoning after a piece's
// text or calls (a harmony reply may reason again after a call) starts a
// new piece, so a message's reasoning always precedes its text.
func (e *chunkEmitter) Reasoning(s string) error {
	p := e.last(func(p *piece) bool { return p.text != "" || len(p.ids) > 0 || len(p.calls) > 0 })
	p.reasoning += s
	return nil
}

// Logprobs implements stream.LogprobEmitter.
func (e *chunkEmitter) Logprobs(lps []engine.Logprob) { e.lps = append(e.lps[:0], lps...) }

// ToolCall implements stream.ToolEmitter.
func (e *chunkEmitter) ToolCall(d stream.ToolCallDelta) error {
	p := e.last(func(*piece) bool { return false })
	p.calls = append(p.calls, d)
	return nil
}

func (e *chunkEmitter) KeepAlive() error { return e.err }

func (e *chunkEmitter) Flush() error {
	if e.err != nil {
		e.pieces = e.pieces[:0]
		return e.err
	}
	for i := range e.pieces {
		p := &e.pieces[i]
		if p.reasoning == "" && p.text == "" && len(p.ids) == 0 && len(p.calls) == 0 {
			continue
		}
		if e.err = e.send(p); e.err != nil {
			break
		}
	}
	e.pieces = e.pieces[:0]
	return e.err
}

// chunk is p as a sluice.v1 chunk; tok gives the logprobs' token bytes.
func chunk(p *piece, tok stream.Tokenizer) *sluicev1.GenerateChunk {
	c := &sluicev1.GenerateChunk{Reasoning: p.reasoning, Text: p.text, TokenIds: uint32s(p.ids)}
	for _, d := range p.calls {
		c.ToolCalls = append(c.ToolCalls, &sluicev1.ToolCallDelta{Index: uint32(d.Index), Id: d.ID, Name: d.Name, Arguments: d.Arguments})
	}
	if len(p.lps) == 0 {
		return c
	}
	bytesOf := func(int32) []byte { return nil }
	if tb, ok := tok.(stream.TokenByter); ok {
		bytesOf = tb.TokenBytes
	}
	c.Logprobs = make([]*sluicev1.TokenLogprob, len(p.lps))
	for i, lp := range p.lps {
		id := p.ids[i]
		b := bytesOf(id)
		tl := &sluicev1.TokenLogprob{TokenId: uint32(id), Token: stream.TokenText(b), Bytes: b, Logprob: lp.Logprob}
		for _, alt := range lp.Top {
			ab := bytesOf(alt.ID)
			tl.TopLogprobs = append(tl.TopLogprobs, &sluicev1.TopLogprob{TokenId: uint32(alt.ID), Token: stream.TokenText(ab), Bytes: ab, Logprob: alt.Logprob})
		}
		c.Logprobs[i] = tl
	}
	return c
}

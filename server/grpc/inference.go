package grpcserver

import (
	"context"
	"errors"
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
	run, err := s.start(call.Context(), g, r.GetRequestId(), "gen-")
	if err != nil {
		return err
	}
	defer run.done()
	id := run.req.ID
	send := func(text string, ids []int32) error {
		return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Chunk{
			Chunk: &sluicev1.GenerateChunk{Text: text, TokenIds: uint32s(ids)}}})
	}
	complete := func(out stream.Outcome, finish string) error {
		usage := &sluicev1.Usage{PromptTokens: uint32(len(run.req.Prompt)), CompletionTokens: uint32(len(run.ts.IDs())),
			CachedTokens: uint32(out.Result.CachedTokens)}
		return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Complete{
			Complete: &sluicev1.GenerateComplete{FinishReason: finish, Usage: usage}}})
	}
	sendErr := func(err error, code codes.Code, httpStatus int) {
		_ = call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Error{
			Error: &sluicev1.GenerateError{Code: code.String(), Message: err.Error(), HttpStatus: uint32(httpStatus)}}})
	}
	return s.stream(run, true, send, complete, sendErr)
}

func (x *inference) Abort(_ context.Context, r *sluicev1.AbortRequest) (*sluicev1.AbortResponse, error) {
	if err := x.s.inflight.abort(r.GetRequestId()); err != nil {
		return nil, toStatus(err)
	}
	return &sluicev1.AbortResponse{}, nil
}

func (x *inference) Tokenize(_ context.Context, r *sluicev1.TokenizeRequest) (*sluicev1.TokenizeResponse, error) {
	b, err := x.s.loaded()
	if err != nil {
		return nil, err
	}
	if err := x.s.servesModel(r.GetModel()); err != nil {
		return nil, toStatus(err)
	}
	var ids []int32
	switch in := r.GetInput().(type) {
	case *sluicev1.TokenizeRequest_Text:
		addSpecial := r.AddSpecialTokens == nil || r.GetAddSpecialTokens()
		ids, err = b.Tokenizer.Encode(in.Text, addSpecial)
	case *sluicev1.TokenizeRequest_Chat:
		var text string
		if text, err = b.Tokenizer.ChatPrompt(chatMessages(in.Chat.GetMessages())); err == nil {
			ids, err = b.Tokenizer.Encode(text, false)
		}
	default:
		err = errors.New("input: text or chat is required")
	}
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: %v", engine.ErrInvalidRequest, err))
	}
	return &sluicev1.TokenizeResponse{TokenIds: uint32s(ids), ContextLength: uint32(b.ContextLen)}, nil
}

func (x *inference) Detokenize(_ context.Context, r *sluicev1.DetokenizeRequest) (*sluicev1.DetokenizeResponse, error) {
	b, err := x.s.loaded()
	if err != nil {
		return nil, err
	}
	if err := x.s.servesModel(r.GetModel()); err != nil {
		return nil, toStatus(err)
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

// chunkEmitter is the Pump's Emitter for gRPC: Text buffers, Flush sends one
// message with the buffered text and the ids of every token consumed since
// the last message. After a failed send every Flush returns that error.
type chunkEmitter struct {
	send func(text string, ids []int32) error
	text string // Pump calls Text at most once between Flushes: no copy then
	ids  []int32
	err  error
}

func (e *chunkEmitter) Text(s string, ids []int32) error {
	e.text += s
	e.ids = append(e.ids, ids...)
	return nil
}

func (e *chunkEmitter) KeepAlive() error { return e.err }

func (e *chunkEmitter) Flush() error {
	if e.err != nil {
		return e.err
	}
	if len(e.text) == 0 && len(e.ids) == 0 {
		return nil
	}
	e.err = e.send(e.text, e.ids)
	e.text, e.ids = "", e.ids[:0]
	return e.err
}

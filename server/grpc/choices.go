package grpcserver

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/engine"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// generateChoices serves a Generate call with n > 1 through the stream
// core's choices path (PrepareChoices, SubmitChoices, PumpChoices), as the
// HTTP API serves n: one prefill, forked KV, seed + j. This adapter only
// frames: each choice's chunks carry its index, its last chunk its finish
// reason, and GenerateComplete every finish reason and the summed usage.
func (x *inference) generateChoices(r *sluicev1.GenerateRequest, call grpc.ServerStreamingServer[sluicev1.GenerateResponse], g *stream.GenRequest) error {
	s := x.s
	b, err := s.loaded()
	if err != nil {
		return err
	}
	if err := s.servesModel(g.Model); err != nil {
		return toStatus(err)
	}
	reqs, err := stream.PrepareChoices(b, g)
	if err != nil {
		return toStatus(err)
	}
	id := r.GetRequestId()
	if id == "" {
		id = stream.NewID("gen-")
	}
	for i := range reqs {
		reqs[i].ID = id
	}
	ctx, done, err := s.inflight.add(call.Context(), id)
	if err != nil {
		return toStatus(err)
	}
	defer done()
	s.lastRecv.Store(time.Now().UnixNano())
	gens, err := b.SubmitChoices(ctx, reqs, max(g.N, 1))
	if err != nil {
		return toStatus(err)
	}
	tok := b.Tokenizer
	send := func(c *sluicev1.GenerateChunk) error {
		return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Chunk{Chunk: c}})
	}
	finishes := make([]string, len(gens))
	cs := make([]stream.ChoiceStream, len(gens))
	for i, gen := range gens {
		em := &chunkEmitter{send: func(p *piece) error {
			c := chunk(p, tok)
			c.Index = uint32(i)
			return send(c)
		}}
		cs[i] = stream.NewChoiceStream(b, g, reqs[i].Prompt)
		cs[i].Gen, cs[i].Out = gen, em
		// PumpChoices runs End under the lock it holds for every emitter
		// call, so this Send never races another choice's.
		cs[i].End = func(out stream.Outcome) {
			if em.Flush() != nil {
				return
			}
			if f, ok := finishOf(ctx, out); ok {
				finishes[i] = f
				em.err = send(&sluicev1.GenerateChunk{Index: uint32(i), FinishReason: f})
			}
		}
	}
	outs := stream.PumpChoices(cs, s.pumpConfig(true), s.drain)
	aborted := errors.Is(context.Cause(ctx), errAbortRPC)
	for _, out := range outs {
		if out.ClientGone && !aborted {
			return toStatus(context.Cause(ctx)) // every choice has ended and freed its blocks
		}
	}
	for _, out := range outs {
		if out.Err != nil {
			code, httpStatus := classify(out.Err)
			_ = call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Error{
				Error: &sluicev1.GenerateError{Code: code.String(), Message: out.Err.Error(), HttpStatus: uint32(httpStatus)}}})
			return toStatus(out.Err)
		}
	}
	// One prompt, counted once however many choices forked from it.
	usage := &sluicev1.Usage{PromptTokens: uint32(len(reqs[0].Prompt)), CachedTokens: uint32(outs[0].Result.CachedTokens)}
	for i := range cs {
		usage.CompletionTokens += uint32(len(cs[i].Text.IDs()))
		usage.ReasoningTokens += uint32(cs[i].ReasoningTokens())
	}
	return call.Send(&sluicev1.GenerateResponse{RequestId: id, Response: &sluicev1.GenerateResponse_Complete{
		Complete: &sluicev1.GenerateComplete{FinishReason: finishes[0], FinishReasons: finishes, Usage: usage}}})
}

// finishOf is a choice's finish reason as Server.stream gives a single
// one's: an Abort RPC (its caller still reading) finishes a choice cut short
// with "abort"; a client that left or an error has none to send.
func finishOf(ctx context.Context, out stream.Outcome) (string, bool) {
	if errors.Is(context.Cause(ctx), errAbortRPC) && out.Err == nil {
		if out.CutShort || out.Finish == "" {
			return string(engine.FinishAbort), true
		}
		return out.Finish, true
	}
	if out.ClientGone || out.Err != nil {
		return "", false
	}
	return out.Finish, true
}

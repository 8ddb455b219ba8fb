package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// runGRPC sends j over the gRPC Generate stream and checks what came back:
// chunks, then exactly one complete (or error) last; valid UTF-8; no stop
// string in the text; token ids counted by usage. An abandoning client
// cancels the call after cutAfter chunks or on its timer.
func runGRPC(ctx context.Context, cc *grpc.ClientConn, j job) outcome {
	o := outcome{endpoint: j.ep.name}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if j.behave == behaveAbandon && j.cutDelay > 0 {
		t := time.AfterFunc(j.cutDelay, cancel)
		defer t.Stop()
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+j.key)
	call, err := sluicev1.NewInferenceClient(cc).Generate(ctx, j.grpcReq)
	if err != nil {
		return grpcFailed(ctx, o, j, err)
	}
	defer holdOpen()()
	var text strings.Builder
	chunks, ids := 0, 0
	var done *sluicev1.GenerateComplete
	var inband *sluicev1.GenerateError
	for {
		msg, err := call.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			if inband != nil { // the call ends with the in-band error's status
				break
			}
			return grpcFailed(ctx, o, j, err)
		}
		if done != nil || inband != nil {
			o.kind, o.detail = "malformed", fmt.Sprintf("grpc: a message after the end: %v", msg)
			return o
		}
		switch r := msg.Response.(type) {
		case *sluicev1.GenerateResponse_Chunk:
			chunks++
			ids += len(r.Chunk.TokenIds)
			text.WriteString(r.Chunk.Text)
			if j.slow > 0 {
				time.Sleep(j.slow)
			}
			if j.behave == behaveAbandon && j.cutAfter > 0 && chunks == j.cutAfter {
				cancel()
				o.kind, o.abandonAt = "abandoned", "mid_decode"
				return o
			}
		case *sluicev1.GenerateResponse_Complete:
			done = r.Complete
		case *sluicev1.GenerateResponse_Error:
			inband = r.Error
		}
	}
	c := Checked{Text: text.String(), TextEvents: 0, OutTokens: -1}
	switch {
	case !utf8.ValidString(c.Text):
		err = errors.New("invalid UTF-8 in the text")
	case inband != nil:
		c.ErrCode = grpcCode(inband.Code)
	case done == nil:
		err = errors.New("no complete message")
	case done.Usage == nil:
		err = errors.New("complete without usage")
	case int(done.Usage.CompletionTokens) != ids:
		err = fmt.Errorf("usage: %d completion tokens, %d token ids in the chunks", done.Usage.CompletionTokens, ids)
	default:
		c.Finish, c.OutTokens = done.FinishReason, int(done.Usage.CompletionTokens)
	}
	if err == nil {
		err = checkContent(c, j.want)
	}
	if err != nil {
		o.kind, o.detail = "malformed", fmt.Sprintf("grpc %v: %v: %q", j.grpcReq, err, c.Text)
		return o
	}
	o.kind, o.errCode, o.tokens = "completed", c.ErrCode, max(c.OutTokens, 0)
	return o
}

// grpcCode names an in-band error by its status code's name, in the HTTP
// errors' snake case ("Internal" → "grpc_internal").
func grpcCode(name string) string { return "grpc_" + strings.ToLower(name) }

// grpcFailed names a gRPC call's failure the way failed names an HTTP one;
// a status the server chose (queue full, shutting down) is an error kind.
func grpcFailed(ctx context.Context, o outcome, j job, err error) outcome {
	st, _ := status.FromError(err)
	switch {
	case ctx.Err() != nil && j.behave == behaveAbandon:
		o.kind, o.abandonAt = "abandoned", "before_first_token"
	case ctx.Err() != nil:
		o.kind = "cut"
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "connect"):
		o.kind = "connection_refused"
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "EOF") || strings.Contains(st.Message(), "connection reset"):
		o.kind = "connection_lost_stream"
	case st.Code() == codes.Unknown:
		o.kind, o.detail = "transport_grpc", err.Error()
	default:
		o.kind, o.detail = "grpc_"+strings.ToLower(st.Code().String()), st.Message()
	}
	return o
}

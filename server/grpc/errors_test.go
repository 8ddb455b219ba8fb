package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
		http int
	}{
		{fmt.Errorf("submit: %w", engine.ErrQueueFull), codes.ResourceExhausted, http.StatusTooManyRequests},
		{engine.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
		{engine.ErrPromptTooLong, codes.InvalidArgument, http.StatusBadRequest},
		{engine.ErrInvalidRequest, codes.InvalidArgument, http.StatusBadRequest},
		{stream.ErrShutdown, codes.Unavailable, http.StatusServiceUnavailable},
		{stream.ErrStall, codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{stream.InvalidParam("messages[0].role", "bad"), codes.InvalidArgument, http.StatusBadRequest},
		{context.Canceled, codes.Canceled, 499},
		{status.Error(codes.Aborted, "x"), codes.Aborted, http.StatusInternalServerError},
		{errors.New("disk on fire"), codes.Internal, http.StatusInternalServerError},
	} {
		code, httpStatus := classify(c.err)
		if code != c.code || httpStatus != c.http {
			t.Errorf("classify(%v) = %v, %d; want %v, %d", c.err, code, httpStatus, c.code, c.http)
		}
	}
	// The table covers every engine sentinel.
	for _, err := range []error{engine.ErrQueueFull, engine.ErrPromptTooLong, engine.ErrInvalidRequest, engine.ErrClosed} {
		if code, _ := classify(err); code == codes.Internal {
			t.Errorf("engine sentinel %v has no row", err)
		}
	}
}

// TestErrorCodes drives every error a client can cause through a real
// server and engine and checks the status code it gets.
func TestErrorCodes(t *testing.T) {
	r := newRig(t, rigOptions{maxSeqs: 1, maxQueue: 1})
	ctx := context.Background()
	gen := func(ctx context.Context, req *sluicev1.GenerateRequest) error {
		stream, err := r.client.Generate(ctx, req)
		if err != nil {
			return err
		}
		return drain(stream).err
	}
	for _, c := range []struct {
		name string
		req  *sluicev1.GenerateRequest
		want codes.Code
	}{
		{"no prompt", &sluicev1.GenerateRequest{}, codes.InvalidArgument},
		{"temperature out of range", &sluicev1.GenerateRequest{Input: textInput("hi"),
			Sampling: &sluicev1.SamplingParams{Temperature: ptr[float32](3)}}, codes.InvalidArgument},
		{"unknown model", &sluicev1.GenerateRequest{Model: "gpt-9", Input: textInput("hi")}, codes.NotFound},
		{"prompt plus max_tokens over the context", &sluicev1.GenerateRequest{Input: textInput("hi"), Sampling: greedy(5000)}, codes.InvalidArgument},
		{"token id outside the vocabulary", &sluicev1.GenerateRequest{
			Input: &sluicev1.GenerateRequest_TokenIds{TokenIds: &sluicev1.TokenIds{Ids: []uint32{1, 99999}}}}, codes.InvalidArgument},
		{"empty token list", &sluicev1.GenerateRequest{
			Input: &sluicev1.GenerateRequest_TokenIds{TokenIds: &sluicev1.TokenIds{}}}, codes.InvalidArgument},
		{"stop token id beyond int32", &sluicev1.GenerateRequest{Input: textInput("hi"),
			Sampling: &sluicev1.SamplingParams{StopTokenIds: []uint32{1 << 31}}}, codes.InvalidArgument},
		{"bad chat role", &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{
			Messages: []*sluicev1.ChatMessage{{Role: "wizard of oz", Content: "hi"}}}}}, codes.InvalidArgument}, // a custom role must be a name
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := gen(ctx, c.req); status.Code(err) != c.want {
				t.Errorf("status %v, want %v", err, c.want)
			}
		})
	}

	// Queue full and duplicate ids need a busy engine: A runs (the loop is
	// held at its 2nd token), B waits in the queue of one, C is refused.
	held, release := r.rec.hold(2)
	defer release()
	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := r.client.Generate(bg, &sluicev1.GenerateRequest{RequestId: "A", Input: textInput("a"), Sampling: greedy(4000)})
	if err != nil {
		t.Fatal(err)
	}
	r.waitSubmitted(t)
	wait(t, "A holding the loop", held)
	b, err := r.client.Generate(bg, &sluicev1.GenerateRequest{RequestId: "B", Input: textInput("b"), Sampling: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	r.waitSubmitted(t)
	if err := gen(ctx, &sluicev1.GenerateRequest{Input: textInput("c"), Sampling: greedy(4)}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third request with a queue of one: %v, want ResourceExhausted", err)
	}
	if err := gen(ctx, &sluicev1.GenerateRequest{RequestId: "A", Input: textInput("again")}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate in-flight id: %v, want AlreadyExists", err)
	}
	// Shutdown: open streams end with an in-band error and UNAVAILABLE.
	r.srv.Drain()
	release()
	for name, s := range map[string]sluicev1.Inference_GenerateClient{"A": a, "B": b} {
		c := drain(s)
		if name == "B" && c.err == nil {
			continue // B's four tokens may all be out before the drain reached it
		}
		if status.Code(c.err) != codes.Unavailable || c.inband.GetCode() != codes.Unavailable.String() || c.inband.GetHttpStatus() != 503 {
			t.Errorf("%s after drain: status %v, in-band %v; want Unavailable both", name, c.err, c.inband)
		}
	}
}

func TestNotLoadedAndAuth(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", HTTP: server.DefaultConfig()}
	cfg.HTTP.ModelID, cfg.HTTP.APIKey = "m", "sesame"
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv}
	r.serve(t)
	ctx := context.Background()
	health := healthpb.NewHealthClient(r.conn)
	hc, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: InferenceService})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health before a model: %v, %v; want NOT_SERVING (and no key needed)", hc, err)
	}
	req := &sluicev1.GenerateRequest{Input: textInput("hi")}
	for _, c := range []struct {
		name string
		md   []string
		want codes.Code
	}{
		{"no key", nil, codes.Unauthenticated},
		{"wrong key", []string{"authorization", "Bearer nope"}, codes.Unauthenticated},
		{"key, model still loading", []string{"authorization", "Bearer sesame"}, codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(ctx, c.md...)
			stream, err := r.client.Generate(ctx, req)
			if err == nil {
				err = drain(stream).err
			}
			if status.Code(err) != c.want {
				t.Errorf("Generate: %v, want %v", err, c.want)
			}
			if _, err := r.client.Tokenize(ctx, &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Text{Text: "x"}}); status.Code(err) != c.want {
				t.Errorf("Tokenize: %v, want %v", err, c.want)
			}
		})
	}
}

// TestReflectionGrpcurl lists the services through server reflection with
// the pinned grpcurl (make grpcurl) and runs one generation with it.
func TestReflectionGrpcurl(t *testing.T) {
	grpcurl, err := filepath.Abs("../../.build/bin/grpcurl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(grpcurl); err != nil {
		t.Skipf("grpcurl not installed (%v): run make grpcurl", err)
	}
	r := newRig(t, rigOptions{})
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(grpcurl, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := run(r.addr, "list")
	for _, svc := range []string{InferenceService, VLLMService, "grpc.health.v1.Health"} {
		if !strings.Contains(list, svc) {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, list)
		}
	}
	if out := run(r.addr, "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Errorf("health check: %s", out)
	}
	out := run("-d", `{"text":"Hello","sampling":{"temperature":0,"max_tokens":4}}`, r.addr, InferenceService+"/Generate")
	if !strings.Contains(out, `"chunk"`) || !strings.Contains(out, `"finishReason": "length"`) {
		t.Errorf("grpcurl Generate output lacks chunks or the finish:\n%s", out)
	}
}

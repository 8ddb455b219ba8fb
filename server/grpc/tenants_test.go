package grpcserver

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
)

func as(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

// TestTenantsAbort: with two keys, a request id is its key's. B's Abort of
// A's running request is an unknown id's (NotFound on sluice.v1, success
// false on vLLM's) and leaves it running; B may use the same id for its own
// request; A's Abort ends A's.
func TestTenantsAbort(t *testing.T) {
	r := newRig(t, rigOptions{keys: []string{"key-a", "key-b"}})
	held, release := r.rec.hold(3)
	defer release()
	a, err := r.client.Generate(as("key-a"), &sluicev1.GenerateRequest{RequestId: "job-1", Input: textInput("Hello"), Sampling: greedy(4000)})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, "the loop holding at A's token 3", held)

	_, errB := r.client.Abort(as("key-b"), &sluicev1.AbortRequest{RequestId: "job-1"})
	_, errNone := r.client.Abort(as("key-b"), &sluicev1.AbortRequest{RequestId: "job-0"})
	if status.Code(errB) != codes.NotFound || status.Convert(errB).Message() != strings.ReplaceAll(status.Convert(errNone).Message(), "job-0", "job-1") {
		t.Errorf("B aborting A's id: %v; an unknown id gets %v", errB, errNone)
	}
	if res, err := r.vllm.Abort(as("key-b"), &vllmpb.AbortRequest{RequestId: "job-1"}); err != nil || res.GetSuccess() {
		t.Errorf("B aborting A's id on vLLM's service: %v, %v; want success false", res, err)
	}
	if _, err := r.client.Abort(as("key-a"), &sluicev1.AbortRequest{RequestId: "job-1"}); err != nil {
		t.Fatalf("A aborting its own id: %v", err)
	}
	release()
	if c := drain(a); c.err != nil || c.complete.GetFinishReason() != "abort" {
		t.Fatalf("A's stream: %v, complete %v; want finish abort (by A's Abort only)", c.err, c.complete)
	}
	r.idle(t)

	// Ids are per key: A's and B's "job-2" run side by side.
	held, release = r.rec.hold(3)
	defer release()
	a, err = r.client.Generate(as("key-a"), &sluicev1.GenerateRequest{RequestId: "job-2", Input: textInput("Hello"), Sampling: greedy(8)})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, "the loop holding at A's token 3", held)
	b, err := r.client.Generate(as("key-b"), &sluicev1.GenerateRequest{RequestId: "job-2", Input: textInput("Hello"), Sampling: greedy(8)})
	if err != nil {
		t.Fatal(err)
	}
	release()
	for name, s := range map[string]sluicev1.Inference_GenerateClient{"A": a, "B": b} {
		if c := drain(s); c.err != nil || c.complete.GetFinishReason() != "length" {
			t.Errorf("%s's job-2: %v, complete %v", name, c.err, c.complete)
		}
	}
}

// TestReflectionFollowsKey: with keys in force, server reflection (the
// services' schema) needs a key like every service; health stays open for
// load balancers.
func TestReflectionFollowsKey(t *testing.T) {
	r := newRig(t, rigOptions{keys: []string{"key-a", "key-b"}})
	list := func(ctx context.Context) ([]string, error) {
		st, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		// A refused stream may end before the Send: Send then says io.EOF,
		// and Recv has the status.
		if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		resp, err := st.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		return names, nil
	}
	if names, err := list(context.Background()); status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a key: %v, %v; want Unauthenticated", names, err)
	}
	if names, err := list(as("key-b")); err != nil || !slices.Contains(names, InferenceService) {
		t.Errorf("reflection with a key: %v, %v", names, err)
	}
	hc, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: InferenceService})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a key: %v, %v; want SERVING", hc, err)
	}
}

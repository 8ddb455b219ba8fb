package grpcserver

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/engine"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
)

// BenchmarkStream measures what the gRPC framing costs per token: the same
// greedy 128-token generation on the tiny model, drained straight from the
// engine, through sluice.v1 (detokenize + text chunks) and through the
// vLLM-compatible service (ids only). The tiny model makes a token cheap, so
// the difference is the endpoint's overhead, not the forward pass.
func BenchmarkStream(b *testing.B) {
	const n = 128
	r := newRig(b, rigOptions{})
	ctx := context.Background()
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	var count int // tokens received in the current sub-benchmark
	tokens := func(b *testing.B) {
		b.ReportMetric(float64(count)/b.Elapsed().Seconds(), "tokens/s")
		count = 0
	}
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seq, err := r.model.Engine.Submit(ctx, engine.Request{Prompt: prompt, MaxTokens: n, StopTokens: nil})
			if err != nil {
				b.Fatal(err)
			}
			for range seq.Tokens() {
				count++
			}
		}
		tokens(b)
	})
	b.Run("sluice.v1", func(b *testing.B) {
		b.ReportAllocs()
		ids := uint32s(prompt)
		for b.Loop() {
			stream, err := r.client.Generate(ctx, &sluicev1.GenerateRequest{
				Input: &sluicev1.GenerateRequest_TokenIds{TokenIds: &sluicev1.TokenIds{Ids: ids}}, Sampling: greedy(n)})
			if err != nil {
				b.Fatal(err)
			}
			c := drain(stream)
			if c.err != nil {
				b.Fatal(c.err)
			}
			count += len(c.ids)
		}
		tokens(b)
	})
	b.Run("vllm", func(b *testing.B) {
		b.ReportAllocs()
		maxTokens := int32(n)
		req := &vllmpb.GenerateRequest{Stream: true, Tokenized: &vllmpb.TokenizedInput{InputIds: uint32s(prompt)},
			SamplingParams: &vllmpb.SamplingParams{MaxTokens: &maxTokens}}
		for b.Loop() {
			stream, err := r.vllm.Generate(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			for {
				msg, err := stream.Recv()
				if err != nil {
					break
				}
				count += len(msg.GetChunk().GetTokenIds())
			}
		}
		tokens(b)
	})
}

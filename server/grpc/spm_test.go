package grpcserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// writeSPMModel writes tinySpec's weights with a SentencePiece vocabulary
// (modeltest writes byte-level BPE only): the model's GGUF is read back and
// written again with the tokenizer keys swapped. Besides <unk>, <s>, </s>
// and the 256 byte tokens every piece starts with "▁", so the tokens a
// greedy generation picks are mostly ones whose space the decoder drops at
// the start of a text unless it knows the prompt before it.
func writeSPMModel(t *testing.T, spec modeltest.Spec) string {
	t.Helper()
	dir := t.TempDir()
	bpe := filepath.Join(dir, "bpe.gguf")
	if err := modeltest.WriteGGUF(bpe, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	g, err := models.OpenGGUF(bpe)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var meta []modeltest.KV
	for _, k := range g.Keys() {
		if !strings.HasPrefix(k, "tokenizer.") {
			v, _ := g.Meta(k)
			meta = append(meta, modeltest.KV{Key: k, Value: v})
		}
	}
	tokens := []string{"<unk>", "<s>", "</s>", "▁"}
	types := []int32{2, 3, 3, 1}  // unknown, control, control, normal
	for c := 'a'; c <= 'z'; c++ { // a word is "▁" + its letter: one token
		tokens, types = append(tokens, string(c), "▁"+string(c)), append(types, 1, 1)
	}
	for i := 0; len(tokens) < spec.Vocab-256; i++ { // pieces no text reaches
		tokens, types = append(tokens, fmt.Sprintf("▁%c%d", 'a'+i%26, i/26)), append(types, 1)
	}
	for b := range 256 { // last: the random weights favour no id range
		tokens, types = append(tokens, fmt.Sprintf("<0x%02X>", b)), append(types, 6) // byte
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	meta = append(meta,
		modeltest.KV{Key: "tokenizer.ggml.model", Value: "llama"},
		modeltest.KV{Key: "tokenizer.ggml.tokens", Value: tokens},
		modeltest.KV{Key: "tokenizer.ggml.token_type", Value: types},
		modeltest.KV{Key: "tokenizer.ggml.scores", Value: scores},
		modeltest.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		modeltest.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
		modeltest.KV{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(0)},
		modeltest.KV{Key: "tokenizer.ggml.add_bos_token", Value: true},
		modeltest.KV{Key: "tokenizer.ggml.add_space_prefix", Value: true},
	)
	var tensors []modeltest.Tensor
	for _, ti := range g.Tensors() {
		ht, err := g.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, modeltest.Tensor{Name: ht.Name, DType: ht.DType, Shape: ht.Shape, Data: ht.Data})
	}
	path := filepath.Join(dir, "spm.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := modeltest.EncodeGGUF(f, meta, tensors, g.Alignment()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// httpFor serves r's model over the OpenAI HTTP API and returns its URL.
func httpFor(t *testing.T, r *rig) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.ModelID = r.model.ID
	hs, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.SetBackend(r.model.Backend()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(hs.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// On a SentencePiece vocabulary the first generated token is "▁x": after a
// prompt it is " x", at the start of a text "x". gRPC and HTTP decode
// through the stream core with the prompt as context and give the same
// text, leading space included.
func TestSPMTextMatchesHTTP(t *testing.T) {
	spec := tinySpec
	spec.Vocab = 1024
	r := newRig(t, rigOptions{path: writeSPMModel(t, spec)})
	const prompt = "a b c"
	stream, err := r.client.Generate(context.Background(), &sluicev1.GenerateRequest{Input: textInput(prompt), Sampling: greedy(12)})
	if err != nil {
		t.Fatal(err)
	}
	got := drain(stream)
	if got.err != nil || got.complete == nil {
		t.Fatalf("gRPC: %v, complete %v", got.err, got.complete)
	}
	body := fmt.Sprintf(`{"prompt":%q,"temperature":0,"max_tokens":12}`, prompt)
	resp, err := http.Post(httpFor(t, r)+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want struct{ Choices []struct{ Text string } }
	if err := json.NewDecoder(resp.Body).Decode(&want); err != nil || len(want.Choices) != 1 {
		t.Fatalf("HTTP response: %v, %+v", err, want)
	}
	if got.text != want.Choices[0].Text {
		t.Errorf("gRPC text %q, HTTP text %q", got.text, want.Choices[0].Text)
	}
	if !strings.HasPrefix(want.Choices[0].Text, " ") {
		t.Errorf("text %q does not start with the first piece's space: the test no longer covers it", want.Choices[0].Text)
	}
	t.Logf("%q %v", got.text, got.ids)
}

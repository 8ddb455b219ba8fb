package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server/auth"
)

// tinySpec is a random two-layer model over modeltest's byte-level BPE
// vocabulary with SmolLM2's ChatML template and control tokens: the real
// engine, tokenizer and template, small enough to load in milliseconds and
// to generate a whole context in well under a second.
var tinySpec = modeltest.Spec{Layers: 2, Hidden: 32, Heads: 2, KVHeads: 1, FFN: 64, Vocab: 300, Seed: 11, Tied: true, ContextLen: 256}

// tinyServer is a Server over a real engine on tinySpec (a 256-token
// context, 64 blocks of 16: four full contexts), accepting keys if any.
func tinyServer(tb testing.TB, keys ...string) http.Handler {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, tinySpec, kernels.F32); err != nil {
		tb.Fatal(err)
	}
	return modelServer(tb, path, 64, keys...)
}

// smolServer is tinyServer over the default model (SmolLM2-135M-Instruct),
// or skips when it was not fetched.
func smolServer(tb testing.TB) http.Handler {
	tb.Helper()
	path := filepath.Join("..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("default model not fetched (%v); run scripts/fetch-model.sh", err)
	}
	return modelServer(tb, path, 64)
}

func modelServer(tb testing.TB, path string, blocks int, keys ...string) http.Handler {
	tb.Helper()
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: blocks, MaxSeqs: 8})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = model.Close(context.Background()) })
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	if len(keys) > 0 {
		if cfg.Keys, err = auth.New(keys, ""); err != nil {
			tb.Fatal(err)
		}
	}
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.SetBackend(model.Backend()); err != nil {
		tb.Fatal(err)
	}
	return srv.HTTPServer().Handler
}

// post sends body to path on h and returns the status and body.
func post(h http.Handler, path, body string) (int, string) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

package server

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// The report, end to end: a prompt whose processing takes many
// stall windows (600 tokens, 16 a step, 10 s a step: 380 s against the
// default 30 s) on a real engine completes over HTTP, streamed and not,
// because every prompt chunk processed is progress.
func TestLongPromptIsNotAStall(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "complete"}[streamed]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := engine.New(&streamtest.SlowModel{Step: 10 * time.Second},
					engine.Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close(context.Background())
				cfg := DefaultConfig()
				cfg.ModelID = testModel
				srv, err := New(cfg, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				v := streamtest.NewPieceVocab()
				if err := srv.SetBackend(&stream.Backend{Engine: stream.FromEngine(e), Tokenizer: v, ContextLen: 1024}); err != nil {
					t.Fatal(err)
				}
				body := `{"prompt":"` + strings.Repeat("a", 600) + `","max_tokens":3,"stream":` + map[bool]string{true: "true", false: "false"}[streamed] + `}`
				rec := httptest.NewRecorder()
				start := time.Now()
				srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
				out := rec.Body.String()
				if rec.Code != 200 || strings.Contains(out, "stall_timeout") || !strings.Contains(out, `"finish_reason":"length"`) {
					t.Errorf("%d %s", rec.Code, out)
				}
				if took := time.Since(start); took < 10*cfg.StallTimeout {
					t.Errorf("took %v: the prompt was not many stall windows long", took)
				}
			})
		})
	}
}

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

// Long prompts over HTTP on a real engine, streamed and not, complete
// without a stall_timeout:
//   - many chunks: 600 tokens, 16 a step, 10 s a step (380 s against the
//     default 30 s): every prompt chunk processed is progress;
//   - one chunk (issue 30's report: with --threads 1 --stall-timeout 2s a
//     1,800-token prompt got 504 stall_timeout): 600 tokens in one step of
//     6 s against a 2 s window: time inside a step that includes the
//     sequence is service, not a stall.
func TestLongPromptIsNotAStall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		chunk    int // MaxBatchTokens
		step     time.Duration
		stall    time.Duration // 0: the default
		minTaken time.Duration // in stall windows
	}{
		{"chunks", 16, 10 * time.Second, 0, 10},
		{"one chunk", 1024, 6 * time.Second, 2 * time.Second, 3},
	} {
		for _, streamed := range []bool{true, false} {
			name := tc.name + "/" + map[bool]string{true: "stream", false: "complete"}[streamed]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e, err := engine.New(&streamtest.SlowModel{Step: tc.step},
						engine.Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: tc.chunk})
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close(context.Background())
					cfg := DefaultConfig()
					cfg.ModelID = testModel
					if tc.stall > 0 {
						cfg.StallTimeout = tc.stall
					}
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
					if took := time.Since(start); took < tc.minTaken*cfg.StallTimeout {
						t.Errorf("took %v: the prompt was not %d stall windows long", took, tc.minTaken)
					}
				})
			})
		}
	}
}

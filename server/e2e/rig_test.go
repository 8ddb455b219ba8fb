package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// keepAlive is short so the queueing test sees comments within a second.
const keepAlive = 200 * time.Millisecond

// rig is one server on the default model shared by every test in the
// package (loading it takes a second or two). MaxSeqs is 1, so a second
// request queues behind the first: tests run one after another.
type rig struct {
	url   string
	model *loader.Model
}

var (
	rigOnce sync.Once
	shared  *rig
	rigErr  error
)

func modelPath() string {
	if p := os.Getenv("SLUICE_TEST_MODEL"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
}

func getRig(t *testing.T) *rig {
	t.Helper()
	if _, err := os.Stat(modelPath()); err != nil {
		t.Skipf("default model absent (%v): run `make model`", err)
	}
	rigOnce.Do(func() { shared, rigErr = startRig() })
	if rigErr != nil {
		t.Fatal(rigErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			shared.dump(t)
		}
	})
	return shared
}

// dump writes every goroutine's stack and the engine's figures to a file, so
// a failure (a sequence that never ends, say) can be diagnosed afterwards.
func (r *rig) dump(t *testing.T) {
	f, err := os.CreateTemp("", "sluice-e2e-"+strings.ReplaceAll(t.Name(), "/", "_")+"-*.txt")
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "engine stats: %+v\n\n", *r.stats())
	_ = pprof.Lookup("goroutine").WriteTo(f, 2)
	t.Logf("goroutines and engine figures: %s", f.Name())
}

func startRig() (*rig, error) {
	m, err := loader.Load(modelPath(), loader.Options{Threads: 2, ContextLen: 2048, KVBlocks: 256, MaxSeqs: 1})
	if err != nil {
		return nil, err
	}
	cfg := server.DefaultConfig()
	cfg.ModelID = m.ID
	cfg.KeepAlive = keepAlive
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	if err := srv.SetBackend(m.Backend()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The server lives as long as the test binary; the process exit ends it.
	go func() { _ = srv.Serve(context.Background(), ln) }()
	return &rig{url: "http://" + ln.Addr().String(), model: m}, nil
}

func (r *rig) post(t *testing.T, path, body string, header ...string) *http.Response {
	t.Helper()
	return ssetest.Post(t, r.url+path, body, header...)
}

func (r *rig) stats() *engine.Stats { return r.model.Engine.Stats() }

// waitIdle polls the engine's published figures until nothing runs or waits
// and no KV block is in use. The figures are published once per step, so
// there is no event to wait on.
func (r *rig) waitIdle(t *testing.T, within time.Duration) *engine.Stats {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := r.stats()
		if s.Running == 0 && s.Waiting == 0 && s.KV.Used == 0 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine not idle after %v: running %d waiting %d KV %+v", within, s.Running, s.Waiting, s.KV)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct{ Code string } `json:"error"`
}

// streamed is what a stream said: text pieces in order, finish reason,
// completion tokens from the usage chunk, in-band error code.
type streamed struct {
	pieces     []string
	text       string
	finish     string
	completion int
	errCode    string
}

func decode(t *testing.T, events []ssetest.Event) streamed {
	t.Helper()
	var s streamed
	for _, ev := range events {
		if ev.Data == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("event %d: %v: %s", ev.ID, err, ev.Data)
		}
		if c.Error != nil {
			s.errCode = c.Error.Code
		}
		if c.Usage != nil {
			s.completion = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if p := ch.Delta.Content + ch.Text; p != "" {
				s.pieces = append(s.pieces, p)
				s.text += p
			}
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
		}
	}
	return s
}

// complete runs a greedy non-streaming completion and returns its text and finish reason.
func (r *rig) complete(t *testing.T, body string) (string, string) {
	t.Helper()
	resp := r.post(t, "/v1/completions", body)
	var out struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
		t.Fatalf("completion: %d %s", resp.StatusCode, raw)
	}
	return out.Choices[0].Text, out.Choices[0].FinishReason
}

package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// gateModel answers every step with token 1 once a value arrives on gate:
// a test holds a step, which is what a wedged loop (a hung device call)
// looks like from outside.
type gateModel struct {
	gate   chan struct{}
	logits []float32
}

func (m *gateModel) VocabSize() int  { return 8 }
func (m *gateModel) ContextLen() int { return 4096 }
func (m *gateModel) Forward(b *kernels.Batch) ([]float32, error) {
	<-m.gate
	m.logits = m.logits[:0]
	for range b.LogitRows {
		m.logits = append(m.logits, 0, 1, 0, 0, 0, 0, 0, 0)
	}
	return m.logits, nil
}

// TestHealthWedgedEngine: /health is 503 once the engine has had work and
// no step for HealthStepTimeout (before, it always answered 200, so a
// wedged replica kept its traffic), and 200 again when the loop steps.
func TestHealthWedgedEngine(t *testing.T) {
	m := &gateModel{gate: make(chan struct{})}
	e, err := engine.New(m, engine.Config{Blocks: 64, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	defer func() {
		close(released)
		_ = e.Close(context.Background())
	}()
	go func() { // once the test is over, let every step through
		<-released
		for {
			select {
			case m.gate <- struct{}{}:
			case <-time.After(time.Second):
				return
			}
		}
	}()
	c := DefaultConfig()
	c.ModelID, c.HealthStepTimeout = "m", 150*time.Millisecond
	s, _ := New(c, slog.New(slog.DiscardHandler))
	v := streamtest.NewPieceVocab()
	if err := s.SetBackend(&stream.Backend{Engine: stream.FromEngine(e), Tokenizer: v, ContextLen: 4096}); err != nil {
		t.Fatal(err)
	}
	health := func() (int, string) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/health", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := health(); code != 200 {
		t.Fatalf("idle engine: %d %s", code, body)
	}
	if _, err := e.Submit(t.Context(), engine.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 50}); err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // one step: the engine has work and has stepped
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := health()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "engine stalled") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a held step for 5 s: /health %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.gate <- struct{}{} // the loop moves again
	for {
		if code, _ := health(); code == 200 {
			break
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("/health stayed 503 after the loop stepped again")
		}
		select {
		case m.gate <- struct{}{}:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDrainReadyFirst: on shutdown /ready turns 503 at once while the
// listener still serves for DrainDelay, so a router stops sending before
// any connection is refused (before, /ready stayed 200 until the listener
// closed).
func TestDrainReadyFirst(t *testing.T) {
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{Script: v.IDs("a", "b"), Interval: time.Millisecond}
	c := DefaultConfig()
	c.ModelID, c.DrainDelay, c.ShutdownTimeout = "m", 400*time.Millisecond, 100*time.Millisecond
	s, _ := New(c, slog.New(slog.DiscardHandler))
	_ = s.SetBackend(&stream.Backend{Engine: eng, Tokenizer: v, ContextLen: 64})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/ready"); code != 200 {
		t.Fatalf("/ready before shutdown: %d", code)
	}
	stop()
	time.Sleep(50 * time.Millisecond)
	if code := get("/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready while draining: %d, want 503", code)
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if err != nil {
		t.Fatalf("a request while draining: %v (the listener closed before the drain delay)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a request while draining: %d", resp.StatusCode)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if code := get("/ready"); code != 0 {
		t.Errorf("after the drain the listener still answers: %d", code)
	}
}

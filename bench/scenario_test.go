package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAbandonPattern(t *testing.T) {
	tests := []struct {
		ratio float64
		n     int
		want  int
	}{{0.3, 10, 3}, {0.3, 100, 30}, {0.5, 8, 4}, {0, 50, 0}, {1, 7, 7}}
	for _, tc := range tests {
		cfg := Config{AbandonRatio: tc.ratio, AbandonAfter: 8, MaxTokens: 32, PromptWords: 4}
		got := 0
		for i := range tc.n {
			if r := cfg.request(i); r.AbandonAfter == 8 {
				got++
			} else if r.AbandonAfter != 0 {
				t.Fatalf("AbandonAfter %d", r.AbandonAfter)
			}
		}
		if got != tc.want {
			t.Errorf("ratio %v over %d: %d abandon, want %d", tc.ratio, tc.n, got, tc.want)
		}
	}
}

// TestAbandonScenario: a fake server that knows (from the prompt's index)
// which clients will hang up, holds those streams until they do, and exports
// a reclaim histogram on /metrics; the report must count the hang-ups and
// carry the timeline and reclaim figures.
func TestAbandonScenario(t *testing.T) {
	cfg := Config{
		Load: Load{Concurrency: 4, Requests: 20}, MaxTokens: 20, PromptWords: 4, AbandonRatio: 0.3, AbandonAfter: 4,
		ScrapeInterval: 5 * time.Millisecond, Settle: 10 * time.Millisecond,
	}
	var abandoning atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Prompt string }
		var i int
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if _, err := fmt.Sscanf(body.Prompt, "Request %d.", &i); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		willLeave := cfg.request(i).AbandonAfter > 0
		if willLeave {
			abandoning.Add(1) // counted as a reclaim at once: the final scrape must see it
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for k := range 20 {
			w.Write([]byte(textChunk("tok")))
			w.(http.Flusher).Flush()
			if willLeave && k == 3 {
				<-r.Context().Done()
				return
			}
		}
		w.Write([]byte(done))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		n := strconv.FormatInt(abandoning.Load(), 10)
		w.Write([]byte(strings.NewReplacer("%A", n, "%B", n, "%C", n).Replace(exposition)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg.Client = &Client{URL: srv.URL, HTTP: NewHTTPClient(8)}
	cfg.MetricsURL = srv.URL + "/metrics"

	rep, err := RunScenario(context.Background(), ScenarioAbandon, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rr := rep.Runs[0]
	if s := rr.Summary; s.Abandoned != 6 || s.OK != 14 || s.Errors != 0 || s.GoodFraction != 1 || s.OutputTokens != 14*20+6*4 {
		t.Errorf("summary %+v", s)
	}
	if rr.Timeline == nil || len(rr.Timeline.Samples) < 2 || rr.Timeline.Samples[0].KVUsage != 0.25 {
		t.Fatalf("timeline %+v", rr.Timeline)
	}
	b, err := json.Marshal(rep) // what --out writes
	if err != nil || !strings.Contains(string(b), `"le":["0.001","0.01","0.1","+Inf"]`) {
		t.Errorf("JSON report: %v\n%.300s", err, b)
	}
	// All 6 reclaims fall in the first bucket (≤ 1 ms): p50 = 0.5 ms by interpolation.
	if got := rr.Timeline.Reclaim.Count; got != 6 || math.Abs(rr.ReclaimP50-0.0005) > 1e-12 {
		t.Errorf("reclaim count %v p50 %v", got, rr.ReclaimP50)
	}
}

func TestErrClass(t *testing.T) {
	tests := []struct{ in, want string }{
		{`HTTP 429: {"error":{"message":"queue full"}}`, "HTTP 429"},
		{"in-band error (server_error): stall", "in-band error (server_error)"},
		{`Post "http://127.0.0.1:1/v1/completions": dial tcp 127.0.0.1:1: connect: connection refused`, "connection refused"},
		{"stream ended without [DONE]", "stream ended without [DONE]"},
	}
	for _, tc := range tests {
		if got := errClass(tc.in); got != tc.want {
			t.Errorf("errClass(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSweepNeverRepeatsAPrompt: every request of every level has its own
// prompt.
func TestSweepNeverRepeatsAPrompt(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Prompt string }
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		seen[body.Prompt]++
		mu.Unlock()
		w.Write([]byte(textChunk("x") + done))
	}))
	defer srv.Close()
	cfg := Config{Client: &Client{URL: srv.URL}, Load: Load{Requests: 6}, MaxTokens: 1, PromptWords: 8, Levels: []int{1, 2, 3}}
	if _, err := RunScenario(context.Background(), ScenarioSweep, cfg); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 18 {
		t.Errorf("%d distinct prompts over 18 requests", len(seen))
	}
}

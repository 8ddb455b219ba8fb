package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunCounts drives a real loopback server through both load shapes and
// checks that every request is sent once and accounted for.
func TestRunCounts(t *testing.T) {
	var served, peak, inFlight atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		served.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{roleChunk, chatChunk("α"), chatChunk("β"), usageChunk(5, 2), done} {
			w.Write([]byte(e))
		}
	}))
	defer srv.Close()
	tests := []struct {
		name string
		load Load
	}{
		{"closed loop", Load{Concurrency: 3, Requests: 20}},
		{"poisson capped", Load{Rate: 2000, Concurrency: 2, Requests: 15, Seed: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			served.Store(0)
			peak.Store(0)
			c := &Client{URL: srv.URL, HTTP: NewHTTPClient(8), Chat: true}
			var p Progress
			var prompts atomic.Int64
			rs := Run(context.Background(), c, tc.load, func(i int) Request {
				prompts.Add(1)
				return Request{Prompt: Synthetic(i, 8, 1), MaxTokens: 2}
			}, &p)
			s := Summarize(rs, SLO{})
			if len(rs) != tc.load.Requests || served.Load() != int64(tc.load.Requests) || prompts.Load() != int64(tc.load.Requests) {
				t.Fatalf("%d results, %d served, %d prompts; want %d", len(rs), served.Load(), prompts.Load(), tc.load.Requests)
			}
			if s.OK != tc.load.Requests || s.OutputTokens != 2*tc.load.Requests || s.PromptTokens != 5*tc.load.Requests {
				t.Errorf("summary %+v", s)
			}
			if p.Done.Load() != int64(tc.load.Requests) || p.InFlight() != 0 || p.Tokens.Load() != int64(s.OutputTokens) {
				t.Errorf("progress done %d in flight %d tokens %d", p.Done.Load(), p.InFlight(), p.Tokens.Load())
			}
			if peak.Load() > int64(tc.load.Concurrency) {
				t.Errorf("%d requests in flight at once, limit %d", peak.Load(), tc.load.Concurrency)
			}
		})
	}
}

func TestSyntheticPrompts(t *testing.T) {
	a, b := Synthetic(0, 50, 7), Synthetic(1, 50, 7)
	if a == b || a != Synthetic(0, 50, 7) {
		t.Error("prompts must differ by index and repeat by seed")
	}
	if n := len(strings.Fields(a)); n != 52 { // "Request 0." + 50 words
		t.Errorf("%d words", n)
	}
}

// TestRunDurationCutsHangingRequests: a server that never answers; the cap
// ends the run and the requests count as cut, not failed.
func TestRunDurationCutsHangingRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(roleChunk + chatChunk("a")))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, HTTP: NewHTTPClient(4), Chat: true}
	rs := Run(context.Background(), c, Load{Concurrency: 4, Duration: 200 * time.Millisecond}, func(i int) Request {
		return Request{Prompt: "x", MaxTokens: 8}
	}, nil)
	s := Summarize(rs, SLO{})
	if len(rs) != 4 || s.Cut != 4 || s.Errors != 0 || s.OutputTokens != 4 {
		t.Errorf("%d results, summary %+v", len(rs), s)
	}
}

func TestLoadPrompts(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       []PromptFile
		wantErr    string
	}{
		{"two", `{"prompt":"héllo"}` + "\n\n" + `{"prompt":"日本語","max_tokens":9}` + "\n", []PromptFile{{"héllo", 0}, {"日本語", 9}}, ""},
		{"empty prompt", `{"prompt":""}`, nil, ":1: empty"},
		{"bad json", `{"prompt":1}`, nil, ":1:"},
		{"no lines", "\n", nil, "no prompts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadPrompts(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

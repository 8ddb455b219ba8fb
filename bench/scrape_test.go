package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const exposition = `# HELP sluice_kv_cache_usage_ratio KV blocks held by live sequences.
# TYPE sluice_kv_cache_usage_ratio gauge
sluice_kv_cache_usage_ratio{model="smol"} 0.25
sluice_kv_blocks_total{model="smol"} 400
sluice_kv_blocks_free{model="smol"} 250
sluice_kv_blocks_cached{model="smol"} 50
sluice_requests_running{model="smol"} 3
sluice_requests_waiting{model="smol"} 1
sluice_requests_aborted_total{cause="stall",model="smol"} 2
sluice_requests_aborted_total{cause="client_disconnect",model="smol"} 7
sluice_kv_reclaim_seconds_bucket{model="smol",le="0.001"} %A
sluice_kv_reclaim_seconds_bucket{model="smol",le="0.01"} %B
sluice_kv_reclaim_seconds_bucket{model="smol",le="0.1"} %C
sluice_kv_reclaim_seconds_bucket{model="smol",le="+Inf"} %C
sluice_kv_reclaim_seconds_sum{model="smol"} 0.5
sluice_kv_reclaim_seconds_count{model="smol"} %C
sluice_generation_tokens_total{model="smol"} 1234
process_resident_memory_bytes 1.2e+08
process_open_fds 42
weird_label{a="x\"y,z",b="w"} 1 1700000000000
`

func TestScrapeSample(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reclaim histogram: 0 observations at the first scrape, then
		// 10 ≤ 1 ms, 20 ≤ 10 ms, 40 ≤ 100 ms (cumulative).
		body := strings.NewReplacer("%A", "0", "%B", "0", "%C", "0").Replace(exposition)
		if calls.Add(1) > 1 {
			body = strings.NewReplacer("%A", "10", "%B", "30", "%C", "70").Replace(exposition)
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	s := &Scraper{URL: srv.URL}

	ss, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := s.sample(ss, 1.5)
	want := Sample{T: 1.5, KVUsage: 0.25, KVUsed: 100, Running: 3, Waiting: 1, RSSBytes: 1.2e8, FDs: 42, Aborted: 7, GenTokens: 1234}
	if got != want {
		t.Errorf("sample %+v\nwant   %+v", got, want)
	}
	for _, x := range ss {
		if x.Name == "weird_label" && (x.Labels["a"] != `x"y,z` || x.Labels["b"] != "w") {
			t.Errorf("labels %q", x.Labels)
		}
	}

	later, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := findHistogram(later, "sluice_kv_reclaim_seconds").Sub(findHistogram(ss, "sluice_kv_reclaim_seconds"))
	tests := []struct{ q, want float64 }{
		{0.1, 0.0007},                   // rank 7 of 10 in (0, 1 ms]
		{0.5, 0.01 + 0.09*(35-30)/40.0}, // rank 35: 5th of 40 in (10, 100 ms]
		{0.99, 0.01 + 0.09*(69.3-30)/40},
	}
	for _, tc := range tests {
		if q := h.Quantile(tc.q); math.Abs(q-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, q, tc.want)
		}
	}
	if !math.IsNaN((Histogram{}).Quantile(0.5)) {
		t.Error("empty histogram must give NaN")
	}
}

// llama-server --metrics names: running and generated tokens map over; no KV.
func TestSampleLlamaServerNames(t *testing.T) {
	ss, err := ParseExposition(strings.NewReader(`# HELP llamacpp:requests_processing Number of requests processing.
llamacpp:tokens_predicted_total 977
llamacpp:requests_processing 5
llamacpp:requests_deferred 2
`))
	if err != nil {
		t.Fatal(err)
	}
	got := (&Scraper{}).sample(ss, 0)
	want := Sample{KVUsage: -1, KVUsed: -1, Running: 5, Waiting: 2, RSSBytes: -1, FDs: -1, Aborted: -1, GenTokens: 977}
	if got != want {
		t.Errorf("sample %+v\nwant   %+v", got, want)
	}
}

// TestScrapeSendsKey: a keyed server's /metrics answers 401 without the key,
// so a benchmark of it would record an empty timeline unless the scraper
// sends the client's key.
func TestScrapeSendsKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("sluice_requests_running{model=\"m\"} 3\n"))
	}))
	defer srv.Close()
	s := &Scraper{URL: srv.URL, APIKey: "k1"}
	ss, err := s.Scrape(context.Background())
	if err != nil || len(ss) != 1 {
		t.Fatalf("scrape with the key: %v %v", ss, err)
	}
	s.APIKey = ""
	if _, err := s.Scrape(context.Background()); err == nil {
		t.Error("a 401 scrape reported no error")
	}
}

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench"
)

func TestBenchDefaults(t *testing.T) {
	tests := []struct {
		name, scenario, metrics string
		set                     []string
		conc                    int
		want                    func(*bench.Config) bool
	}{
		{"single: 4×concurrency requests, no abandon, no scraping", bench.ScenarioSingle, "", nil, 3,
			func(c *bench.Config) bool {
				return c.Load.Requests == 12 && c.AbandonRatio == 0 && c.MetricsURL == "" && c.Settle == 0
			}},
		{"sweep: levels parsed, 30 s per level, drain as long", bench.ScenarioSweep, "", nil, 1,
			func(c *bench.Config) bool {
				return slices.Equal(c.Levels, []int{1, 4, 16}) && c.Load.Duration == 30*time.Second && c.Load.Drain == 30*time.Second
			}},
		{"abandon: 16 clients, 256 tokens, scrapes URL/metrics", bench.ScenarioAbandon, "", nil, 1,
			func(c *bench.Config) bool {
				return c.Load.Concurrency == 16 && c.MaxTokens == 256 && c.AbandonRatio == 0.3 &&
					c.MetricsURL == "http://h:1/metrics" && c.Settle == 3*time.Second
			}},
		{"abandon: explicit flags win, metrics none", bench.ScenarioAbandon, "none", []string{"concurrency", "max-tokens"}, 2,
			func(c *bench.Config) bool { return c.Load.Concurrency == 2 && c.MaxTokens == 64 && c.MetricsURL == "" }},
		{"streams-1000: held 60 s, long answers, never drained", bench.ScenarioStreams1k, "", nil, 1,
			func(c *bench.Config) bool {
				return c.Load.Duration == time.Minute && c.MaxTokens == 4096 && c.MetricsURL == "http://h:1/metrics"
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bench.Config{Load: bench.Load{Concurrency: tc.conc, Drain: -1}, MaxTokens: 64, AbandonRatio: 0.3, AbandonAfter: 8}
			set := map[string]bool{}
			for _, s := range tc.set {
				set[s] = true
			}
			if err := benchDefaults(&cfg, tc.scenario, "1,4,16", tc.metrics, "http://h:1/", set); err != nil {
				t.Fatal(err)
			}
			if !tc.want(&cfg) {
				t.Errorf("%+v", cfg)
			}
		})
	}
	bad := bench.Config{Load: bench.Load{Concurrency: 1}, MaxTokens: 8}
	if err := benchDefaults(&bad, bench.ScenarioSweep, "1,x", "", "http://h", map[string]bool{}); err == nil {
		t.Error("a bad --levels entry was accepted")
	}
}

package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Scenario names accepted by RunScenario.
const (
	ScenarioSingle    = "single"
	ScenarioSweep     = "sweep"
	ScenarioAbandon   = "abandon"
	ScenarioStreams1k = "streams-1000"
)

// DefaultLevels is the sweep's concurrency ladder.
var DefaultLevels = []int{1, 4, 16, 64, 256}

// Config is one scenario's settings; cmd/sluice fills it from flags.
type Config struct {
	Client      *Client
	Label       string
	Load        Load // per run (per level in a sweep)
	MaxTokens   int
	PromptWords int          // synthetic prompt length when Prompts is empty
	Prompts     []PromptFile // from --prompts
	SLO         SLO

	Levels       []int   // sweep
	AbandonRatio float64 // abandon: fraction of clients that hang up
	AbandonAfter int     // abandon: after this many content events
	Streams      int     // streams-1000: streams held open at once

	MetricsURL     string        // "" = no scraping (abandon needs it)
	ServerPID      int           // > 0: server RSS and fds from /proc
	ScrapeInterval time.Duration // default 250 ms
	Settle         time.Duration // scraping goes on this long after the load

	Progress io.Writer // live status line; nil = none

	// sent counts requests of earlier runs in this scenario: request
	// numbers go on across runs, so no prompt repeats (a repeated one would
	// be served from the prefix cache, and a sweep would flatter its later
	// levels).
	sent int
}

// request i of a run: prompt from the file (cycled) or synthetic; every
// 1/AbandonRatio-th request hangs up, spread evenly so any prefix of the run
// has the same mix.
func (c *Config) request(i int) Request {
	r := Request{MaxTokens: c.MaxTokens}
	if len(c.Prompts) > 0 {
		p := c.Prompts[i%len(c.Prompts)]
		r.Prompt = p.Prompt
		if p.MaxTokens > 0 {
			r.MaxTokens = p.MaxTokens
		}
	} else {
		r.Prompt = Synthetic(i, c.PromptWords, c.Load.Seed)
	}
	if c.AbandonRatio > 0 && int(float64(i+1)*c.AbandonRatio) > int(float64(i)*c.AbandonRatio) {
		r.AbandonAfter = c.AbandonAfter
	}
	return r
}

// RunScenario runs one named scenario and reports it.
func RunScenario(ctx context.Context, name string, cfg Config) (*Report, error) {
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: ThisMachine(), URL: cfg.Client.URL, Label: cfg.Label, Scenario: name}
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = 250 * time.Millisecond
	}
	switch name {
	case ScenarioSingle:
		rep.Runs = append(rep.Runs, cfg.run(ctx, runName(cfg.Load), cfg.Load))
	case ScenarioSweep:
		levels := cfg.Levels
		if len(levels) == 0 {
			levels = DefaultLevels
		}
		for _, c := range levels {
			l := cfg.Load
			l.Concurrency, l.Rate = c, 0
			rep.Runs = append(rep.Runs, cfg.run(ctx, fmt.Sprintf("c=%d", c), l))
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
		}
	case ScenarioAbandon:
		if cfg.MetricsURL == "" || cfg.AbandonRatio <= 0 || cfg.AbandonAfter <= 0 {
			return nil, fmt.Errorf("bench: abandon needs a metrics URL, --abandon-ratio > 0 and --abandon-after > 0")
		}
		rr := cfg.run(ctx, fmt.Sprintf("abandon %.0f%% after %d", 100*cfg.AbandonRatio, cfg.AbandonAfter), cfg.Load)
		rr.AbandonRatio, rr.AbandonAfter = cfg.AbandonRatio, cfg.AbandonAfter
		rep.Runs = append(rep.Runs, rr)
	case ScenarioStreams1k:
		l := cfg.Load
		l.Concurrency, l.Requests, l.Rate, l.Drain = cfg.Streams, cfg.Streams, 0, 0
		if l.Duration <= 0 {
			return nil, fmt.Errorf("bench: %s needs --duration (how long the streams are held)", name)
		}
		rr, rs := cfg.runResults(ctx, fmt.Sprintf("%d streams", cfg.Streams), l)
		rep.Runs = append(rep.Runs, rr)
		rep.Notes = streamsNotes(rs, rr.Timeline, l.Duration)
	default:
		return nil, fmt.Errorf("bench: unknown scenario %q (single, sweep, abandon, streams-1000)", name)
	}
	return rep, nil
}

func runName(l Load) string {
	if l.Rate > 0 {
		return fmt.Sprintf("rate=%g/s", l.Rate)
	}
	return fmt.Sprintf("c=%d", l.Concurrency)
}

func (cfg *Config) run(ctx context.Context, name string, l Load) RunReport {
	rr, _ := cfg.runResults(ctx, name, l)
	return rr
}

// runResults runs one load, scraping /metrics beside it when configured.
func (cfg *Config) runResults(ctx context.Context, name string, l Load) (RunReport, []Result) {
	var p Progress
	progCtx, stopProg := context.WithCancel(ctx)
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		if cfg.Progress != nil {
			PrintProgress(progCtx, cfg.Progress, cfg.Label+" "+name, &p, 500*time.Millisecond)
		}
	}()
	var tl <-chan Timeline
	scrapeCtx, stopScrape := context.WithCancel(ctx)
	defer stopScrape()
	if cfg.MetricsURL != "" || cfg.ServerPID > 0 {
		s := &Scraper{URL: cfg.MetricsURL, PID: cfg.ServerPID, Interval: cfg.ScrapeInterval, HTTP: NewHTTPClient(2), APIKey: cfg.Client.APIKey}
		tl = s.Start(scrapeCtx, cfg.Settle)
	}
	base := cfg.sent
	rs := Run(ctx, cfg.Client, l, func(i int) Request { return cfg.request(base + i) }, &p)
	cfg.sent += int(p.Sent.Load())
	stopProg()
	<-progDone
	stopScrape()
	rr := NewRunReport(name, l, cfg.MaxTokens, rs, cfg.SLO)
	if tl != nil {
		rr.SetTimeline(<-tl)
	}
	return rr, rs
}

// streamsNotes says what the held-open streams showed: how many got a first
// token, the first failure, memory and fds per stream.
func streamsNotes(rs []Result, tl *Timeline, hold time.Duration) []string {
	var notes []string
	var ttft []float64
	errs := map[string]int{}
	failed := 0
	var firstErr string
	var firstErrAt time.Time
	for i := range rs {
		r := &rs[i]
		if r.ContentEvents > 0 {
			ttft = append(ttft, r.TTFT.Seconds())
		}
		if r.Err != "" {
			failed++
			errs[errClass(r.Err)]++
			if at := r.Start.Add(r.E2E); firstErr == "" || at.Before(firstErrAt) {
				firstErr, firstErrAt = r.Err, at
			}
		}
	}
	first := fmt.Sprintf("%d of %d streams received a first token within %v", len(ttft), len(rs), hold)
	if d := NewDist(ttft); d.N > 0 {
		first += fmt.Sprintf(" (TTFT p50 %.2f s, p99 %.2f s, max %.2f s)", d.P50, d.P99, d.Max)
	}
	notes = append(notes, first)
	if firstErr == "" {
		notes = append(notes, "no stream failed while held open")
	} else {
		var classes []string
		for k, n := range errs {
			classes = append(classes, fmt.Sprintf("%d× %s", n, k))
		}
		sort.Strings(classes)
		notes = append(notes, fmt.Sprintf("first failure: %s; failures by kind: %s", firstErr, strings.Join(classes, "; ")))
	}
	if tl != nil && len(tl.Samples) > 1 {
		base := tl.Samples[0]
		peak := slices.MaxFunc(tl.Samples, func(a, b Sample) int { return cmpFloat(a.RSSBytes, b.RSSBytes) })
		peakFD := slices.MaxFunc(tl.Samples, func(a, b Sample) int { return cmpFloat(a.FDs, b.FDs) })
		held := len(rs) - failed // refused streams cost the server little
		if base.RSSBytes > 0 && held > 0 {
			notes = append(notes, fmt.Sprintf("server RSS %.1f MiB idle → %.1f MiB peak: %.1f KiB per stream held (%d held)",
				base.RSSBytes/(1<<20), peak.RSSBytes/(1<<20), (peak.RSSBytes-base.RSSBytes)/float64(held)/1024, held))
		}
		if base.FDs > 0 {
			notes = append(notes, fmt.Sprintf("server open fds %.0f idle → %.0f peak", base.FDs, peakFD.FDs))
		}
	}
	return notes
}

// errClass shortens an error to its kind (HTTP status, in-band type, or the
// text before the first colon-separated detail).
func errClass(e string) string {
	if strings.HasPrefix(e, "HTTP ") && len(e) >= 8 {
		return e[:8]
	}
	if i := strings.Index(e, "): "); strings.HasPrefix(e, "in-band error (") && i > 0 {
		return e[:i+1]
	}
	if i := strings.LastIndex(e, ": "); i > 0 {
		return e[i+2:]
	}
	return e
}

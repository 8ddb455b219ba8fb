package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything one `sluice bench` invocation measured, as written by
// --json and read by the plotting tool.
type Report struct {
	Command  string      `json:"command"`
	Date     string      `json:"date"` // RFC 3339, UTC
	Machine  Machine     `json:"machine"`
	URL      string      `json:"url"`
	Label    string      `json:"label,omitempty"` // the server under test, as the user names it
	Scenario string      `json:"scenario"`
	Runs     []RunReport `json:"runs"`
	Notes    []string    `json:"notes,omitempty"`
}

// Machine identifies where a figure was measured.
type Machine struct {
	CPU   string `json:"cpu"` // /proc/cpuinfo "model name" (what lscpu prints)
	Cores int    `json:"cores"`
}

// ThisMachine describes the machine the bench runs on (the server's too,
// for the loopback runs BENCHMARKS.md records).
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// RunReport is one load level of a scenario.
type RunReport struct {
	Name         string  `json:"name"`
	Concurrency  int     `json:"concurrency"`
	Rate         float64 `json:"rate,omitempty"`
	MaxTokens    int     `json:"max_tokens"`
	AbandonAfter int     `json:"abandon_after,omitempty"`
	AbandonRatio float64 `json:"abandon_ratio,omitempty"`
	Summary      Summary `json:"summary"`
	// Samples for distribution plots, in seconds: the TTFT and every
	// inter-token gap of each request Summary's TTFT and ITL cover.
	TTFTs    []float64 `json:"ttft_samples_s"`
	ITLs     []float64 `json:"itl_samples_s"`
	Timeline *Timeline `json:"timeline,omitempty"`
	// ReclaimP50/P99: sluice_kv_reclaim_seconds quantiles over the run
	// (NaN-free: -1 when the server reported none).
	ReclaimP50 float64 `json:"reclaim_p50_s,omitempty"`
	ReclaimP99 float64 `json:"reclaim_p99_s,omitempty"`
}

// NewRunReport summarizes rs and keeps its samples.
func NewRunReport(name string, load Load, maxTokens int, rs []Result, slo SLO) RunReport {
	rr := RunReport{Name: name, Concurrency: load.Concurrency, Rate: load.Rate, MaxTokens: maxTokens}
	rr.Summary, rr.TTFTs, rr.ITLs = summarize(rs, slo)
	return rr
}

// SetTimeline attaches a scraped timeline and its reclaim quantiles.
func (rr *RunReport) SetTimeline(tl Timeline) {
	rr.Timeline = &tl
	rr.ReclaimP50, rr.ReclaimP99 = -1, -1
	if q := tl.Reclaim.Quantile(0.5); !math.IsNaN(q) {
		rr.ReclaimP50 = q
	}
	if q := tl.Reclaim.Quantile(0.99); !math.IsNaN(q) {
		rr.ReclaimP99 = q
	}
}

func msStr(s float64) string { return fmt.Sprintf("%.1f", s*1000) }

// WriteTable prints one line per run: counts, throughput, latency
// percentiles (ms) and goodput.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "# %s  %s  %s (%d cores)  %s\n", r.Label, r.Date, r.Machine.CPU, r.Machine.Cores, r.URL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tconc\tok\terr\tcut\taband\ttok/s\treq/s\tTTFT p50\tp90\tp99\tITL p50\tp90\tp99\tTPOT p50\tE2E p50\tgood/s\tgood%\t")
	for _, x := range r.Runs {
		s := x.Summary
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2fs\t%.2f\t%.0f\t\n",
			x.Name, x.Concurrency, s.OK, s.Errors, s.Cut, s.Abandoned, s.TokensPerS, s.RequestsPerS,
			msStr(s.TTFT.P50), msStr(s.TTFT.P90), msStr(s.TTFT.P99),
			msStr(s.ITL.P50), msStr(s.ITL.P90), msStr(s.ITL.P99),
			msStr(s.TPOT.P50), s.E2E.P50, s.GoodputPerS, 100*s.GoodFraction)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(latencies in ms; SLO for goodput:", sloString(r.Runs), ")")
	for _, x := range r.Runs {
		if x.Timeline != nil {
			fmt.Fprintf(w, "%s: %s\n", x.Name, timelineString(x.Timeline))
		}
		if x.ReclaimP50 > 0 {
			fmt.Fprintf(w, "%s: KV reclaim (abort → blocks free) p50 %s ms, p99 %s ms over %.0f aborts\n",
				x.Name, msOrNA(x.ReclaimP50), msOrNA(x.ReclaimP99), x.Timeline.Reclaim.Count)
		}
		for _, e := range x.Summary.FirstErrors {
			fmt.Fprintf(w, "%s: error: %s\n", x.Name, e)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func msOrNA(s float64) string {
	if s < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", s*1000)
}

func sloString(runs []RunReport) string {
	if len(runs) == 0 {
		return "none"
	}
	o := runs[0].Summary.SLO
	if o == (SLO{}) {
		return "none, every finished request counts"
	}
	return fmt.Sprintf("TTFT ≤ %v, TPOT ≤ %v", o.TTFT, o.TPOT)
}

// timelineString: peak and final KV usage and server memory.
func timelineString(tl *Timeline) string {
	if len(tl.Samples) == 0 {
		return fmt.Sprintf("no /metrics samples (%d scrape errors: %s)", tl.Errors, tl.LastErr)
	}
	peakKV, peakRSS, peakFD := -1.0, -1.0, -1.0
	for _, s := range tl.Samples {
		peakKV, peakRSS, peakFD = max(peakKV, s.KVUsage), max(peakRSS, s.RSSBytes), max(peakFD, s.FDs)
	}
	last := tl.Samples[len(tl.Samples)-1]
	var parts []string
	if peakKV >= 0 {
		parts = append(parts, fmt.Sprintf("KV usage peak %.1f%%, at end %.1f%%", 100*peakKV, 100*last.KVUsage))
	} else if tl.LastErr != "" {
		parts = append(parts, "no KV figures ("+tl.LastErr+")")
	}
	if peakRSS >= 0 {
		parts = append(parts, fmt.Sprintf("server RSS peak %.0f MiB", peakRSS/(1<<20)))
	}
	if peakFD >= 0 {
		parts = append(parts, fmt.Sprintf("fds peak %.0f", peakFD))
	}
	return strings.Join(append(parts, fmt.Sprintf("%d samples", len(tl.Samples))), "; ")
}

// PrintProgress writes a one-line status to w every interval until ctx
// ends: on a terminal it rewrites the line, elsewhere it appends lines less
// often.
func PrintProgress(ctx context.Context, w io.Writer, label string, p *Progress, interval time.Duration) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	if !tty {
		interval *= 10
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	line := func() string {
		el := time.Since(time.Unix(0, p.Started.Load())).Seconds()
		return fmt.Sprintf("%s: %.0fs sent %d done %d in flight %d failed %d, %.1f tok/s",
			label, el, p.Sent.Load(), p.Done.Load(), p.InFlight(), p.Failed.Load(), float64(p.Tokens.Load())/max(el, 1e-9))
	}
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintf(w, "\r\033[K%s\n", line())
			}
			return
		case <-t.C:
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line())
			} else {
				fmt.Fprintln(w, line())
			}
		}
	}
}

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// summary is the part of bench.Summary the tables print.
type summary struct {
	OutputTokens int     `json:"output_tokens"`
	OK           int     `json:"ok"`
	Errors       int     `json:"errors"`
	Abandoned    int     `json:"abandoned"`
	Cut          int     `json:"cut"`
	TokensPerS   float64 `json:"output_tokens_per_s"`
	ReqPerS      float64 `json:"requests_per_s"`
	TTFT         dist    `json:"ttft_s"`
	TPOT         dist    `json:"tpot_s"`
	ITL          dist    `json:"itl_s"`
	E2E          dist    `json:"e2e_s"`
	Good         int     `json:"good"`
	GoodputPS    float64 `json:"goodput_per_s"`
	GoodFrac     float64 `json:"good_fraction"`
}

type dist struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func ms(s float64) string { return fmt.Sprintf("%.0f", s*1000) }

// table writes one Markdown row per run of every report; with exactly two
// reports whose runs share names, a ratio row (first ÷ second) follows each
// pair: throughput above 1 and latency below 1 favour the first.
func table(w io.Writer, reps []report) {
	fmt.Fprintln(w, "| server | run | ok / err / cut / aband | out tok/s | req/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | TPOT p50 | E2E p50 | goodput (req/s, %) |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(label string, r runData) {
		s := r.Summary
		fmt.Fprintf(w, "| %s | %s | %d / %d / %d / %d | %.1f | %.2f | %s ms | %s ms | %s ms | %s ms | %s ms | %.1f s | %.2f, %.0f%% |\n",
			label, r.Name, s.OK, s.Errors, s.Cut, s.Abandoned, s.TokensPerS, s.ReqPerS,
			ms(s.TTFT.P50), ms(s.TTFT.P99), ms(s.ITL.P50), ms(s.ITL.P99), ms(s.TPOT.P50), s.E2E.P50, s.GoodputPS, 100*s.GoodFrac)
	}
	defer serverTable(w, reps)
	if len(reps) != 2 {
		for _, r := range reps {
			for _, x := range r.Runs {
				row(r.Label, x)
			}
		}
		return
	}
	a, b := reps[0], reps[1]
	for _, x := range a.Runs {
		row(a.Label, x)
		for _, y := range b.Runs {
			if y.Name != x.Name {
				continue
			}
			row(b.Label, y)
			s, t := x.Summary, y.Summary
			fmt.Fprintf(w, "| **%s ÷ %s** | %s | | **%s** | %s | **%s** | %s | %s | %s | %s | %s | %s |\n",
				a.Label, b.Label, x.Name, ratio(s.TokensPerS, t.TokensPerS), ratio(s.ReqPerS, t.ReqPerS),
				ratio(s.TTFT.P50, t.TTFT.P50), ratio(s.TTFT.P99, t.TTFT.P99), ratio(s.ITL.P50, t.ITL.P50),
				ratio(s.ITL.P99, t.ITL.P99), ratio(s.TPOT.P50, t.TPOT.P50), ratio(s.E2E.P50, t.E2E.P50), ratio(s.GoodputPS, t.GoodputPS))
		}
	}
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "–"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", a/b), "0"), ".") + "×"
}

// serverTable: what the server side showed during each run that was
// sampled (KV usage from /metrics, reclaim latency, RSS and fds).
func serverTable(w io.Writer, reps []report) {
	header := false
	for _, r := range reps {
		for _, x := range r.Runs {
			tl := x.Timeline
			if tl == nil || len(tl.Samples) == 0 {
				continue
			}
			if !header {
				fmt.Fprintln(w, "\n| server | run | KV usage peak | KV usage at end | sequences running peak / at end | aborts for disconnect | KV reclaim p50 / p99 (from buckets), mean | tokens generated / received | RSS peak | fds peak |")
				fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
				header = true
			}
			first, last := tl.Samples[0], tl.Samples[len(tl.Samples)-1]
			var kv, run, rss, fds float64 = -1, -1, -1, -1
			for _, s := range tl.Samples {
				kv, run, rss, fds = max(kv, s.KVUsage), max(run, s.Running), max(rss, s.RSSBytes), max(fds, s.FDs)
			}
			reclaim := "–"
			if x.ReclaimP50 > 0 {
				reclaim = fmt.Sprintf("%.0f / %.0f ms, mean %.0f ms (n=%.0f)", 1000*x.ReclaimP50, 1000*x.ReclaimP99,
					1000*tl.Reclaim.Sum/tl.Reclaim.Count, tl.Reclaim.Count)
			}
			gen := "–"
			if first.Gen >= 0 && last.Gen >= 0 {
				// Server-side tokens over the sampled window (load and settle)
				// against what the clients received: the difference went to
				// nobody.
				gen = fmt.Sprintf("%.0f / %d", last.Gen-first.Gen, x.Summary.OutputTokens)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |\n", r.Label, x.Name,
				pct(kv), pct(last.KVUsage), num(run), num(last.Running), num(last.Aborted-max(first.Aborted, 0)),
				reclaim, gen, mib(rss), num(fds))
		}
	}
}

func pct(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func num(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func mib(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", v/(1<<20))
}

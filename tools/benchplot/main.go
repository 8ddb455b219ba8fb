// Command benchplot draws the PNG charts of BENCHMARKS.md from the JSON
// reports `sluice bench --out` writes. It is its own module so that the
// plotting library (gonum.org/v1/plot and its fonts) stays out of the
// server's module graph and binary.
//
//	benchplot cdf -metric ttft|itl [-run NAME] -o out.png a.json b.json ...
//	    empirical CDF of the TTFT or inter-token gaps of one run per report
//	benchplot throughput -o out.png a.json ...   (output tokens/s vs concurrency)
//	benchplot kv|running -o out.png a.json ...   (KV usage or sequences running over time)
//	benchplot table a.json [b.json]              (Markdown table; with two reports, ratio rows a ÷ b)
//
// One line per report, named by its label (--label of sluice bench).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// report is the part of bench.Report the charts read.
type report struct {
	Label string    `json:"label"`
	Runs  []runData `json:"runs"`
}

type runData struct {
	Name        string    `json:"name"`
	Concurrency int       `json:"concurrency"`
	Summary     summary   `json:"summary"`
	TTFTs       []float64 `json:"ttft_samples_s"`
	ITLs        []float64 `json:"itl_samples_s"`
	Timeline    *timeline `json:"timeline"`
	ReclaimP50  float64   `json:"reclaim_p50_s"`
	ReclaimP99  float64   `json:"reclaim_p99_s"`
}

type sample struct {
	T        float64 `json:"t_s"`
	KVUsage  float64 `json:"kv_usage"`
	Running  float64 `json:"running"`
	RSSBytes float64 `json:"rss_bytes"`
	FDs      float64 `json:"fds"`
	Aborted  float64 `json:"aborted_disconnect"`
	Gen      float64 `json:"generated_tokens"`
}

type timeline struct {
	Samples []sample `json:"samples"`
	Reclaim struct {
		Count float64 `json:"count"`
		Sum   float64 `json:"sum"`
	} `json:"reclaim"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: benchplot cdf|throughput|kv|running|table [flags] report.json ...")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("o", "", "PNG file to write")
	metric := fs.String("metric", "ttft", "cdf: ttft or itl")
	runName := fs.String("run", "", "cdf: the run (e.g. c=16) of each report; default its first")
	title := fs.String("title", "", "chart title")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if (*out == "" && args[0] != "table") || fs.NArg() == 0 {
		return errors.New("need -o and at least one report")
	}
	var reps []report
	for _, path := range fs.Args() {
		r, err := load(path)
		if err != nil {
			return err
		}
		reps = append(reps, r)
	}
	if args[0] == "table" {
		table(os.Stdout, reps)
		return nil
	}
	p := plot.New()
	p.Title.Text = *title
	var err error
	switch args[0] {
	case "cdf":
		err = cdf(p, reps, *metric, *runName)
	case "throughput":
		err = throughput(p, reps)
	case "kv", "running":
		err = timelineChart(p, reps, args[0])
	default:
		err = fmt.Errorf("unknown chart %q", args[0])
	}
	if err != nil {
		return err
	}
	p.Legend.Top, p.Legend.Left = true, args[0] == "cdf"
	p.Add(plotter.NewGrid())
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, *out); err != nil {
		return fmt.Errorf("saving %s: %w", *out, err)
	}
	return nil
}

func load(path string) (report, error) {
	var r report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	if r.Label == "" {
		r.Label = strings.TrimSuffix(path, ".json")
	}
	return r, nil
}

// palette: distinguishable on white, in the order reports are given.
var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{255, 127, 14, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
}

func addLine(p *plot.Plot, i int, name string, xy plotter.XYs, points bool) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.Color = palette[i%len(palette)]
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	if points {
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		s.Color = l.Color
		p.Add(s)
	}
	return nil
}

// cdf: fraction of requests (or gaps) at or below x, x in ms on a log axis.
func cdf(p *plot.Plot, reps []report, metric, runName string) error {
	p.X.Label.Text = metric + " (ms, log scale)"
	p.Y.Label.Text = "fraction ≤ x"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.TickerFunc(ticks125)
	for i, r := range reps {
		k := slices.IndexFunc(r.Runs, func(x runData) bool {
			return runName == "" || x.Name == runName
		})
		if k < 0 {
			return fmt.Errorf("%s: no run %q", r.Label, runName)
		}
		xs := r.Runs[k].TTFTs
		if metric == "itl" {
			xs = r.Runs[k].ITLs
		}
		if len(xs) == 0 {
			return fmt.Errorf("%s %s: no %s samples", r.Label, r.Runs[k].Name, metric)
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		// A step function: at each sample the fraction jumps from j/n to (j+1)/n.
		xy := make(plotter.XYs, 0, 2*len(s))
		for j, v := range s {
			x := math.Max(v*1000, 0.01) // log axis: no zero
			xy = append(xy, plotter.XY{X: x, Y: float64(j) / float64(len(s))}, plotter.XY{X: x, Y: float64(j+1) / float64(len(s))})
		}
		if err := addLine(p, i, fmt.Sprintf("%s (%s, n=%d)", r.Label, r.Runs[k].Name, len(s)), xy, false); err != nil {
			return err
		}
	}
	return nil
}

// throughput: output tokens/s against concurrency (log2 axis).
func throughput(p *plot.Plot, reps []report) error {
	p.X.Label.Text = "concurrent clients (log scale)"
	p.Y.Label.Text = "output tokens/s"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for i, r := range reps {
		var xy plotter.XYs
		for _, x := range r.Runs {
			c := float64(max(x.Concurrency, 1))
			xy = append(xy, plotter.XY{X: c, Y: x.Summary.TokensPerS})
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == c }) {
				ticks = append(ticks, plot.Tick{Value: c, Label: fmt.Sprint(x.Concurrency)})
			}
		}
		if err := addLine(p, i, r.Label, xy, true); err != nil {
			return err
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	return nil
}

// timelineChart: a scraped server figure over the run, one line per report:
// KV-cache usage (percent of blocks) or sequences running.
func timelineChart(p *plot.Plot, reps []report, field string) error {
	p.X.Label.Text = "time since start (s)"
	get := func(s sample) float64 { return 100 * s.KVUsage }
	p.Y.Label.Text = "KV cache usage (% of blocks)"
	if field == "running" {
		get = func(s sample) float64 { return s.Running }
		p.Y.Label.Text = "sequences running"
	}
	p.Y.Min = 0
	for i, r := range reps {
		if len(r.Runs) == 0 || r.Runs[0].Timeline == nil || len(r.Runs[0].Timeline.Samples) == 0 {
			return fmt.Errorf("%s: no timeline", r.Label)
		}
		var xy plotter.XYs
		for _, s := range r.Runs[0].Timeline.Samples {
			if v := get(s); v >= 0 {
				xy = append(xy, plotter.XY{X: s.T, Y: v})
			}
		}
		if len(xy) == 0 {
			return fmt.Errorf("%s: the server exported no %s figure", r.Label, field)
		}
		if err := addLine(p, i, r.Label, xy, false); err != nil {
			return err
		}
	}
	return nil
}

// ticks125 labels 1, 2, 5 × 10^k on a log axis (LogTicks labels only powers
// of ten, too few for latencies that span one or two decades).
func ticks125(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return ts
}

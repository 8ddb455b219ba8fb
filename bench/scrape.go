package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Series is one parsed exposition line: name{labels} value.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseExposition reads Prometheus text format (version 0.0.4). Comments,
// timestamps and unparsable lines are skipped.
func ParseExposition(r io.Reader) ([]Series, error) {
	var out []Series
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSeries(line)
		if ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func parseSeries(line string) (Series, bool) {
	var s Series
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, false
	} else {
		s.Name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return s, false
		}
		s.Labels = parseLabels(rest[1:end])
		rest = rest[end+1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, false
	}
	s.Value = v
	return s, true
}

// parseLabels reads a="x",b="y" (values may hold escaped quotes and commas).
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return m
		}
		key := strings.TrimSpace(strings.TrimLeft(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			val.WriteByte(s[i])
		}
		m[key] = val.String()
		s = strings.TrimLeft(s[min(i+1, len(s)):], ", ")
	}
	return m
}

// Sample is one moment of the server as /metrics and /proc saw it. A figure
// the server does not export is -1.
type Sample struct {
	T        float64 `json:"t_s"` // since the scraper started
	KVUsage  float64 `json:"kv_usage"`
	KVUsed   float64 `json:"kv_blocks_used"`
	Running  float64 `json:"running"`
	Waiting  float64 `json:"waiting"`
	RSSBytes float64 `json:"rss_bytes"`
	FDs      float64 `json:"fds"`
	Aborted  float64 `json:"aborted_disconnect"` // sluice_requests_aborted_total{cause="client_disconnect"}
	// GenTokens: tokens the server has generated since it started, whoever
	// was still listening (sluice_generation_tokens_total, or llama-server's
	// llamacpp:tokens_predicted_total).
	GenTokens float64 `json:"generated_tokens"`
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations ≤
// Bounds[i]; the last bound is +Inf.
type Histogram struct {
	Bounds []float64 `json:"le"`
	Counts []float64 `json:"counts"`
	Sum    float64   `json:"sum"`
	Count  float64   `json:"count"`
}

// findHistogram collects name's buckets from one scrape.
func findHistogram(ss []Series, name string) Histogram {
	var h Histogram
	type b struct{ le, n float64 }
	var bs []b
	for _, s := range ss {
		switch s.Name {
		case name + "_bucket":
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err == nil {
				bs = append(bs, b{le, s.Value})
			}
		case name + "_sum":
			h.Sum = s.Value
		case name + "_count":
			h.Count = s.Value
		}
	}
	slices.SortFunc(bs, func(x, y b) int { return cmpFloat(x.le, y.le) })
	for _, x := range bs {
		h.Bounds, h.Counts = append(h.Bounds, x.le), append(h.Counts, x.n)
	}
	return h
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MarshalJSON writes the bounds as strings ("+Inf" has no JSON number).
func (h Histogram) MarshalJSON() ([]byte, error) {
	le := make([]string, len(h.Bounds))
	for i, b := range h.Bounds {
		le[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	return json.Marshal(struct {
		LE     []string  `json:"le"`
		Counts []float64 `json:"counts"`
		Sum    float64   `json:"sum"`
		Count  float64   `json:"count"`
	}{le, h.Counts, h.Sum, h.Count})
}

// Sub returns h − earlier: the observations made between two scrapes.
func (h Histogram) Sub(earlier Histogram) Histogram {
	d := Histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts), Sum: h.Sum - earlier.Sum, Count: h.Count - earlier.Count}
	if slices.Equal(h.Bounds, earlier.Bounds) {
		for i := range d.Counts {
			d.Counts[i] -= earlier.Counts[i]
		}
	}
	return d
}

// Quantile estimates the q-quantile (0..1) as Prometheus' histogram_quantile
// does: linear within the bucket that holds rank q·count, the first bucket
// starting at 0; a rank in the +Inf bucket answers the highest finite bound.
// NaN when the histogram is empty.
func (h Histogram) Quantile(q float64) float64 {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] == 0 {
		return math.NaN()
	}
	rank := q * h.Counts[n-1]
	i, _ := slices.BinarySearchFunc(h.Counts, rank, cmpFloat)
	if i >= n {
		i = n - 1
	}
	if math.IsInf(h.Bounds[i], 1) {
		if n >= 2 {
			return h.Bounds[n-2]
		}
		return math.NaN()
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	inBucket := h.Counts[i] - below
	if inBucket <= 0 {
		return h.Bounds[i]
	}
	return lo + (h.Bounds[i]-lo)*(rank-below)/inBucket
}

// Scraper samples a server's /metrics (and, for a local server, its
// /proc/PID) at a fixed interval.
type Scraper struct {
	URL      string // the /metrics address; "" = sample /proc/PID only
	PID      int    // > 0: read RSS and open fds from /proc/PID as well
	Interval time.Duration
	HTTP     *http.Client
	APIKey   string // sent as a bearer token: a keyed server's /metrics follows the key
}

// Scrape is one read of /metrics (nil series when it failed).
func (s *Scraper) Scrape(ctx context.Context) ([]Series, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, err
	}
	if s.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	hc := s.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", s.URL, resp.StatusCode)
	}
	return ParseExposition(resp.Body)
}

// sample turns one scrape into a Sample.
func (s *Scraper) sample(ss []Series, t float64) Sample {
	get := func(name string, labels ...string) float64 {
		for _, x := range ss {
			if x.Name != name {
				continue
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && x.Labels[labels[i]] == labels[i+1]
			}
			if match {
				return x.Value
			}
		}
		return -1
	}
	// either returns the first figure the server exports: Sluice's name,
	// then llama-server's (llama-server --metrics has no KV usage gauge).
	either := func(names ...string) float64 {
		for _, n := range names {
			if v := get(n); v >= 0 {
				return v
			}
		}
		return -1
	}
	sm := Sample{
		T: t, KVUsage: get("sluice_kv_cache_usage_ratio"),
		Running:  either("sluice_requests_running", "llamacpp:requests_processing"),
		Waiting:  either("sluice_requests_waiting", "llamacpp:requests_deferred"),
		RSSBytes: get("process_resident_memory_bytes"), FDs: get("process_open_fds"),
		Aborted:   get("sluice_requests_aborted_total", "cause", "client_disconnect"),
		GenTokens: either("sluice_generation_tokens_total", "llamacpp:tokens_predicted_total"),
	}
	sm.KVUsed = -1
	if total, free, cached := get("sluice_kv_blocks_total"), get("sluice_kv_blocks_free"), get("sluice_kv_blocks_cached"); total >= 0 && free >= 0 {
		sm.KVUsed = total - free - max(cached, 0)
	}
	if s.PID > 0 {
		if rss, err := ProcRSS(s.PID); err == nil {
			sm.RSSBytes = float64(rss)
		}
		if n, err := ProcFDs(s.PID); err == nil {
			sm.FDs = float64(n)
		}
	}
	return sm
}

// Timeline is what a Scraper recorded over a run.
type Timeline struct {
	Samples []Sample `json:"samples"`
	// Reclaim is sluice_kv_reclaim_seconds observed during the run.
	Reclaim Histogram `json:"reclaim"`
	Errors  int       `json:"scrape_errors"`
	LastErr string    `json:"last_scrape_error,omitempty"`
}

// Start takes a first sample now (the baseline the reclaim histogram is
// measured from, so call it before the load starts), then samples every
// Interval until ctx ends, and for settle after that (so the timeline shows
// what the server holds once the load is gone). The Timeline arrives on the
// channel.
func (s *Scraper) Start(ctx context.Context, settle time.Duration) <-chan Timeline {
	r := &recorder{s: s, start: time.Now()}
	r.take(ctx)
	out := make(chan Timeline, 1)
	go func() { out <- r.run(ctx, settle) }()
	return out
}

// recorder accumulates one Timeline; after the first sample only Start's
// goroutine touches it.
type recorder struct {
	s           *Scraper
	start       time.Time
	tl          Timeline
	first, last []Series
}

func (r *recorder) take(ctx context.Context) {
	if r.s.URL == "" { // a server without /metrics: /proc only
		r.tl.Samples = append(r.tl.Samples, r.s.sample(nil, time.Since(r.start).Seconds()))
		return
	}
	ss, err := r.s.Scrape(ctx)
	if err != nil {
		r.tl.Errors++
		r.tl.LastErr = err.Error()
		if r.s.PID > 0 { // /proc still answers for a server without /metrics
			r.tl.Samples = append(r.tl.Samples, r.s.sample(nil, time.Since(r.start).Seconds()))
		}
		return
	}
	if r.first == nil {
		r.first = ss
	}
	r.last = ss
	r.tl.Samples = append(r.tl.Samples, r.s.sample(ss, time.Since(r.start).Seconds()))
}

func (r *recorder) run(ctx context.Context, settle time.Duration) Timeline {
	tick := time.NewTicker(r.s.Interval)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			if ctx.Err() == nil { // both ready: a scrape now would only fail
				r.take(ctx)
			}
		}
	}
	end, cancel := context.WithTimeout(context.Background(), settle+5*time.Second)
	defer cancel()
	deadline := time.After(settle)
	for settling := true; settling; {
		select {
		case <-deadline:
			settling = false
		case <-tick.C:
			r.take(end)
		}
	}
	r.take(end)
	const reclaim = "sluice_kv_reclaim_seconds"
	r.tl.Reclaim = findHistogram(r.last, reclaim).Sub(findHistogram(r.first, reclaim))
	return r.tl
}

// ProcRSS reads a process's resident set size in bytes from /proc.
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "123456 kB"
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("rss: %w", err)
				}
				return n << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("rss: no VmRSS in /proc/%d/status", pid)
}

// ProcFDs counts a process's open file descriptors.
func ProcFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("fds: %w", err)
	}
	return len(ents), nil
}

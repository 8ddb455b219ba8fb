// Command soak is Sluice's reliability soak (scripts/soak.sh runs it): it
// starts the fault-injecting build of `sluice serve` on loopback, holds a
// thousand streams on every endpoint (chat, completions, responses and
// messages over HTTP, streamed and whole; Generate over gRPC) while a third
// of the clients hang up, hostile requests arrive, steps fail and the server
// is restarted with SIGTERM, and then checks that the server is back to its
// baseline (KV blocks, sequences, goroutines, fds), that every stream and
// response that completed is well formed (check.go, grpc.go), that memory
// stayed flat, and that the two API keys sharing the load each got their
// share and never read the other's streams or cache (keys.go).
//
// Two phases, one server process each:
//
//  1. a burst: -streams streams sent within -burst-over (with whole-response
//     requests among them and one malformed request in ten), held for
//     -phase1, then SIGTERM in the middle of them; the server drains
//     (--shutdown-timeout) and must exit 0
//  2. after a restart, the fresh server's baseline, a warm-up that touches
//     its whole KV pool (warmUp), then a closed loop of -clients clients for
//     -phase2, the same mix; then what still runs is cut, and the server
//     must settle back to the baseline, and RSS over the last half of this
//     load must be flat within 5%
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type options struct {
	bin, model, out                       string
	streams, clients                      int
	phase1, phase2, drain, burstOver      time.Duration
	faultEvery, threads, maxSeq, kvBlocks int
	seed                                  uint64
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", ".build/bin/sluice-faultinject", "the faultinject build of sluice")
	flag.StringVar(&o.model, "model", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "model")
	flag.StringVar(&o.out, "out", "", "write the report as JSON here")
	flag.IntVar(&o.streams, "streams", 1000, "phase 1: streaming requests in the burst (whole-response and malformed ones come on top)")
	flag.IntVar(&o.clients, "clients", 150, "phase 2: concurrent clients")
	flag.DurationVar(&o.phase1, "phase1", 60*time.Second, "phase 1: from the burst to SIGTERM")
	flag.DurationVar(&o.phase2, "phase2", 150*time.Second, "phase 2: closed loop")
	flag.DurationVar(&o.drain, "drain", 15*time.Second, "phase 2: time for what runs to finish before it is cut")
	flag.IntVar(&o.faultEvery, "fault-every", 40, "a failed step every N engine steps (--inject-fault fail/N)")
	flag.IntVar(&o.threads, "threads", 2, "server threads")
	flag.IntVar(&o.maxSeq, "max-seqs", 32, "server --max-seqs")
	flag.IntVar(&o.kvBlocks, "kv-blocks", 256, "server --kv-blocks")
	flag.DurationVar(&o.burstOver, "burst-over", 3*time.Second, "phase 1: the burst's requests are sent over this long")
	flag.Uint64Var(&o.seed, "seed", 1, "workload seed")
	flag.Parse()
	rep, err := run(o)
	if rep != nil {
		rep.print(os.Stdout)
		if o.out != "" {
			raw, _ := json.MarshalIndent(rep, "", "  ")
			_ = os.WriteFile(o.out, raw, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

// tally counts outcomes; safe for concurrent use.
type tally struct {
	mu        sync.Mutex
	kinds     map[string]int
	abandonAt map[string]int
	inband    map[string]int
	byEP      map[string]int
	resumed   int
	tokens    int
	samples   []string // a few malformed or unexpected outcomes, for the report
	byKey     keyTally // keys.go
}

func newTally() *tally {
	return &tally{kinds: map[string]int{}, abandonAt: map[string]int{}, inband: map[string]int{}, byEP: map[string]int{}}
}

func (t *tally) add(o outcome) {
	t.byKey.add(o)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kinds[o.kind]++
	if o.abandonAt != "" {
		t.abandonAt[o.abandonAt]++
	}
	if o.kind == "completed" {
		t.byEP[o.endpoint]++
		t.tokens += o.tokens
		if o.errCode != "" {
			t.inband[o.errCode]++
		}
		if o.resumed {
			t.resumed++
		}
	}
	if (o.kind == "malformed" || o.kind == "unexpected_status" || strings.HasPrefix(o.kind, "transport_") ||
		strings.HasPrefix(o.kind, "http_4")) && len(t.samples) < 8 {
		t.samples = append(t.samples, o.detail)
	}
}

// phase runs one server's load and returns its tallies and scrapes.
type phaseReport struct {
	Requests      int            `json:"requests"`
	Outcomes      map[string]int `json:"outcomes"`
	AbandonedAt   map[string]int `json:"abandoned_at"`
	InBandErrors  map[string]int `json:"in_band_errors"`
	CompletedByEP map[string]int `json:"completed_by_endpoint"`
	Resumed       int            `json:"resumed_streams_completed"`
	Tokens        int            `json:"output_tokens_completed"`
	StreamsPeak   int64          `json:"streams_open_peak"`
	ServerPeak    float64        `json:"server_running_plus_waiting_peak"`
	StepFailures  float64        `json:"step_failures"`
	Steps         float64        `json:"engine_steps"`
	Samples       []string       `json:"samples,omitempty"`
	ExitAfterTERM string         `json:"exit_after_sigterm,omitempty"`
}

func (t *tally) report() phaseReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	return phaseReport{Outcomes: t.kinds, AbandonedAt: t.abandonAt, InBandErrors: t.inband, CompletedByEP: t.byEP,
		Resumed: t.resumed, Tokens: t.tokens, Samples: t.samples}
}

type rssSample struct {
	T         float64 `json:"t_s"`
	Phase     int     `json:"phase"`
	RSS       int64   `json:"rss"`
	HeapInuse int64   `json:"go_heap_inuse"`
	HeapSys   int64   `json:"go_heap_sys"`
	KVUsed    int     `json:"kv_blocks_not_free"`
	GCs       int64   `json:"gc_cycles"`
	NextGC    int64   `json:"go_next_gc"`
}

type report struct {
	Date     string             `json:"date"`
	Options  string             `json:"options"`
	Phase1   phaseReport        `json:"phase1"`
	Phase2   phaseReport        `json:"phase2"`
	Baseline map[string]float64 `json:"baseline"`
	Final    map[string]float64 `json:"final"`
	Warmup   warmupReport       `json:"phase2_warmup"`
	Keys     keysReport         `json:"keys"` // per-key share, cross-key reads (keys.go)
	RSS      []rssSample        `json:"rss"`
	RSSPeak  int64              `json:"rss_peak"`
	RSSFinal int64              `json:"rss_final"`
	// RSSLastHalfSpread is (max − min) / max over the samples of the
	// second half of phase 2's load (the server after the restart, warmed
	// up: see warmUp), to its end; RSSLastHalfFrom is where that half starts.
	RSSLastHalfSpread float64  `json:"rss_last_half_spread"`
	RSSLastHalfFrom   float64  `json:"rss_last_half_from_s"`
	HeapLastHalf      [2]int64 `json:"go_heap_inuse_last_half_min_max"`
	GCsLastHalf       [2]int64 `json:"gc_cycles_last_half_first_last"`
	// NextGCLastHalf is the GC's heap target's range over the same samples.
	// It follows the heap live at each collection (what was in flight then
	// included), which RSS climbs towards from below as the heap's reserve
	// grows: RSS still rising under a steady target is that climb, a target
	// rising cycle after cycle with the same load in flight is what a leak
	// would look like. Reported, not checked.
	NextGCLastHalf [2]int64 `json:"go_next_gc_last_half_min_max"`
	Wall           float64  `json:"wall_s"`
	Failures       []string `json:"failures"`
}

func run(o options) (*report, error) {
	start := time.Now()
	rep := &report{Date: start.UTC().Format(time.RFC3339), Options: fmt.Sprintf("%+v", o)}
	dir, err := os.MkdirTemp("", "sluice-soak")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	keys := []string{"soak-key-one", "soak-key-two"}
	soakKeys = keys
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, []byte("# soak\n"+strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--model", o.model, "--threads", fmt.Sprint(o.threads), "--ctx", "2048", "--kv-blocks", fmt.Sprint(o.kvBlocks),
		"--max-seqs", fmt.Sprint(o.maxSeq), "--max-queue", "2000", "--inject-fault", fmt.Sprintf("fail/%d", o.faultEvery),
		"--api-key-file", keyFile, "--body-timeout", "2s", "--shutdown-timeout", "3s", "--web=false", "--grpc-addr", grpcAddr}
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 0, DisableCompression: true}}
	r := rand.New(rand.NewPCG(o.seed, 19))
	dial := func(s *server) (conns, error) {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		return conns{hc: hc, cc: cc, base: s.url}, err
	}

	var rssMu sync.Mutex
	var cur *server
	sampleStop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // RSS and the Go heap once a second, whichever server runs
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sampleStop:
				return
			case <-tick.C:
			}
			rssMu.Lock()
			s := cur
			rssMu.Unlock()
			if s == nil {
				continue
			}
			v := procRSS(s.pid())
			if v <= 0 {
				continue
			}
			smp := rssSample{T: time.Since(start).Seconds(), RSS: v, Phase: s.phase}
			if m, err := s.metrics(); err == nil {
				smp.HeapInuse, smp.HeapSys = int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_memstats_heap_sys_bytes"])
				smp.KVUsed = int(m["sluice_kv_blocks_total"] - m["sluice_kv_blocks_free"])
				smp.GCs, smp.NextGC = int64(m["go_gc_duration_seconds_count"]), int64(m["go_memstats_next_gc_bytes"])
			}
			rssMu.Lock()
			rep.RSS = append(rep.RSS, smp)
			rssMu.Unlock()
		}
	}()
	setServer := func(s *server) { rssMu.Lock(); cur = s; rssMu.Unlock() }

	// Phase 1: the burst, then SIGTERM in the middle of it.
	srv, err := startServer(ctx, o.bin, args)
	if err != nil {
		return nil, err
	}
	srv.phase = 1
	setServer(srv)
	cl, err := dial(srv)
	if err != nil {
		srv.kill()
		return nil, err
	}
	t1 := newTally()
	peak1 := watchPeak(srv)
	var wg sync.WaitGroup
	// o.streams streaming requests (HTTP and gRPC), the whole-response
	// requests drawn among them, and one malformed request in ten overall.
	var burst []func()
	for i, streams := 0, 0; streams < o.streams; i++ {
		if i%10 == 9 {
			b := newBad(r, keys)
			burst = append(burst, func() { t1.add(runBad(ctx, cl.base, b)) })
			continue
		}
		j := newJob(r, i, keys)
		if j.stream {
			streams++
		}
		burst = append(burst, func() { t1.add(runJob(ctx, cl, j)) })
	}
	for _, f := range burst {
		wg.Go(f)
		time.Sleep(o.burstOver / time.Duration(len(burst)))
	}
	time.Sleep(max(o.phase1-time.Since(start), 0))
	m1, _ := srv.metrics()
	stopPeak1 := peak1()
	took, exitErr := srv.terminate(30 * time.Second)
	wg.Wait()
	cl.cc.Close()
	p1 := t1.report()
	p1.Requests = len(burst)
	p1.StreamsPeak, p1.ServerPeak = openPeak.Swap(0), stopPeak1
	p1.StepFailures, p1.Steps = m1["sluice_engine_step_failures_total"], m1["sluice_step_duration_seconds_count"]
	p1.ExitAfterTERM = fmt.Sprintf("%v after %v", exitErr, took.Round(time.Millisecond))
	if exitErr != nil {
		rep.Failures = append(rep.Failures, "phase 1 server after SIGTERM: "+exitErr.Error())
	}
	rep.Phase1 = p1
	rep.Keys.Phase1 = t1.byKey.report(keys)
	hc.CloseIdleConnections()

	// Phase 2: restart, warm up, baseline, closed loop, settle.
	if srv, err = startServer(ctx, o.bin, args); err != nil {
		return rep, err
	}
	defer srv.kill()
	srv.phase = 2
	setServer(srv)
	if cl, err = dial(srv); err != nil {
		return rep, err
	}
	defer cl.cc.Close()
	// The baseline is the fresh server's: what the load leaves must go
	// back to that. The warm-up's blocks are all free or cached after it.
	rep.Baseline = snapshot(srv)
	for range 4 { // the lowest of a few: a scrape's closing connection may still count in one
		time.Sleep(250 * time.Millisecond)
		for k, v := range snapshot(srv) {
			rep.Baseline[k] = min(rep.Baseline[k], v)
		}
	}
	rep.Warmup = warmUp(ctx, cl, keys[0], o.kvBlocks, o.maxSeq)
	rep.Keys.Cache = probeCache(ctx, hc, cl.base, keys)
	loadStart := time.Since(start).Seconds()
	t2 := newTally()
	peak2 := watchPeak(srv)
	loadCtx, cut := context.WithCancel(ctx)
	stopSending := time.Now().Add(o.phase2)
	var mu sync.Mutex
	n := len(burst)
	for range o.clients {
		wg.Go(func() {
			for time.Now().Before(stopSending) {
				mu.Lock()
				n++
				i := n
				var j job
				var b bad
				isBad := i%10 == 9
				if isBad {
					b = newBad(r, keys)
				} else {
					j = newJob(r, i, keys)
				}
				mu.Unlock()
				if isBad {
					t2.add(runBad(loadCtx, cl.base, b))
				} else {
					t2.add(runJob(loadCtx, cl, j))
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(stopSending) + o.drain):
		cut()
		<-done
	}
	cut()
	m2, _ := srv.metrics()
	p2 := t2.report()
	p2.Requests = n - len(burst)
	p2.StreamsPeak, p2.ServerPeak = openPeak.Load(), peak2()
	p2.StepFailures, p2.Steps = m2["sluice_engine_step_failures_total"], m2["sluice_step_duration_seconds_count"]
	rep.Phase2 = p2
	rep.Keys.Phase2 = t2.byKey.report(keys)
	hc.CloseIdleConnections()
	cl.cc.Close()
	rep.Final = settle(srv, rep.Baseline)
	close(sampleStop)
	<-sampled
	rep.finish(start, loadStart)
	rep.Failures = rep.Keys.check(rep.Failures)
	return rep, nil
}

// warmUp touches every KV block and the largest batch once before the
// baseline, so that the RSS check measures growth under load and not the
// first touch of memory the server reserved at start: the KV pool is one
// allocation whose pages the kernel maps on first write, block by block as
// the pool hands out blocks it never used (see RELIABILITY in
// BENCHMARKS.md for the figures). 1.5 × maxSeq requests at once, each
// with a distinct prompt of about the pool's share per sequence, so the
// pool runs out of blocks it never handed out.
func warmUp(ctx context.Context, cl conns, key string, kvBlocks, maxSeq int) warmupReport {
	start := time.Now()
	words := max(kvBlocks*16/maxSeq/3, 8) // " w12" is about three tokens
	var w warmupReport
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range maxSeq + maxSeq/2 {
		prompt := fmt.Sprintf("%d:", i) + strings.Repeat(fmt.Sprintf(" w%d", i), words)
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 4, "temperature": 0})
		j := job{ep: endpoints[1], body: body, key: key, want: Expect{MaxTokens: 4}}
		wg.Go(func() {
			o := runWhole(ctx, cl.hc, cl.base, j)
			mu.Lock()
			defer mu.Unlock()
			w.Requests++
			if o.kind == "completed" {
				w.Completed++
			}
		})
	}
	wg.Wait()
	w.Seconds = time.Since(start).Seconds()
	return w
}

type warmupReport struct {
	Requests  int     `json:"requests"`
	Completed int     `json:"completed"`
	Seconds   float64 `json:"seconds"`
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// watchPeak samples running + waiting every 500 ms until the returned
// function is called, which returns the peak.
func watchPeak(s *server) func() float64 {
	stop := make(chan struct{})
	done := make(chan float64, 1)
	go func() {
		peak := 0.0
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
			if m, err := s.metrics(); err == nil {
				peak = max(peak, m["sluice_requests_running"]+m["sluice_requests_waiting"])
			}
		}
	}()
	var once sync.Once
	var peak float64
	return func() float64 { once.Do(func() { close(stop); peak = <-done }); return peak }
}

// snapshot is the figures that must return to baseline. The fds are
// counted while no scrape is open (metrics holds the lock only while it
// reads).
func snapshot(s *server) map[string]float64 {
	m, _ := s.metrics()
	scrapes.Lock()
	defer scrapes.Unlock()
	return map[string]float64{
		"kv_blocks_in_use": m["sluice_kv_blocks_total"] - m["sluice_kv_blocks_free"] - m["sluice_kv_blocks_cached"],
		"requests_running": m["sluice_requests_running"],
		"requests_waiting": m["sluice_requests_waiting"],
		"goroutines":       m["go_goroutines"],
		"fds":              float64(procFDs(s.pid())),
		"rss_mib":          float64(procRSS(s.pid())) / (1 << 20),
	}
}

// settle waits (up to 30 s) for the server to come back to base and
// returns the last snapshot.
func settle(s *server, base map[string]float64) map[string]float64 {
	var snap map[string]float64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		snap = snapshot(s)
		if snap["kv_blocks_in_use"] <= base["kv_blocks_in_use"] && snap["requests_running"] == 0 && snap["requests_waiting"] == 0 &&
			snap["goroutines"] <= base["goroutines"] && snap["fds"] <= base["fds"] {
			break
		}
	}
	return snap
}

func (rep *report) finish(start time.Time, loadStart float64) {
	rep.Wall = time.Since(start).Seconds()
	for _, k := range []string{"kv_blocks_in_use", "requests_running", "requests_waiting", "goroutines", "fds"} {
		if rep.Final[k] > rep.Baseline[k] {
			rep.Failures = append(rep.Failures, fmt.Sprintf("leak: %s %v at the end, %v at baseline", k, rep.Final[k], rep.Baseline[k]))
		}
	}
	for _, p := range []phaseReport{rep.Phase1, rep.Phase2} {
		for _, k := range []string{"malformed", "unexpected_status"} {
			if p.Outcomes[k] > 0 {
				rep.Failures = append(rep.Failures, fmt.Sprintf("%d %s", p.Outcomes[k], k))
			}
		}
		for k, v := range p.Outcomes {
			if strings.HasPrefix(k, "transport_") {
				rep.Failures = append(rep.Failures, fmt.Sprintf("%d %s", v, k))
			}
		}
	}
	if len(rep.RSS) > 0 {
		half := (loadStart + rep.Wall) / 2
		rep.RSSLastHalfFrom = half
		lo, hi := int64(1<<62), int64(0)
		hlo, hhi := int64(1<<62), int64(0)
		for _, s := range rep.RSS {
			rep.RSSPeak = max(rep.RSSPeak, s.RSS)
			if s.T >= half && s.Phase == 2 {
				lo, hi = min(lo, s.RSS), max(hi, s.RSS)
				hlo, hhi = min(hlo, s.HeapInuse), max(hhi, s.HeapInuse)
			}
		}
		rep.HeapLastHalf = [2]int64{hlo, hhi}
		rep.NextGCLastHalf = [2]int64{1 << 62, 0}
		for _, s := range rep.RSS {
			if s.T >= half && s.Phase == 2 && s.NextGC > 0 {
				rep.NextGCLastHalf = [2]int64{min(rep.NextGCLastHalf[0], s.NextGC), max(rep.NextGCLastHalf[1], s.NextGC)}
			}
		}
		for _, s := range rep.RSS {
			if s.T >= half && s.Phase == 2 {
				if rep.GCsLastHalf[0] == 0 {
					rep.GCsLastHalf[0] = s.GCs
				}
				rep.GCsLastHalf[1] = s.GCs
			}
		}
		rep.RSSFinal = rep.RSS[len(rep.RSS)-1].RSS
		if hi > 0 {
			rep.RSSLastHalfSpread = float64(hi-lo) / float64(hi)
			if rep.RSSLastHalfSpread > 0.05 {
				rep.Failures = append(rep.Failures, fmt.Sprintf("RSS over the last half not flat: %.1f%% spread", 100*rep.RSSLastHalfSpread))
			}
		}
	}
}

func (rep *report) print(w *os.File) {
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(w, "soak %s, %.0f s wall\n", rep.Date, rep.Wall)
	for i, p := range []phaseReport{rep.Phase1, rep.Phase2} {
		fmt.Fprintf(w, "phase %d: %d requests; streams open peak %d (server running+waiting peak %.0f); steps %.0f, failed steps %.0f\n",
			i+1, p.Requests, p.StreamsPeak, p.ServerPeak, p.Steps, p.StepFailures)
		fmt.Fprintf(w, "  outcomes: %s\n  abandoned at: %s\n  in-band errors of completed streams: %s\n  completed by endpoint: %s (resumed %d, %d output tokens)\n",
			sorted(p.Outcomes), sorted(p.AbandonedAt), sorted(p.InBandErrors), sorted(p.CompletedByEP), p.Resumed, p.Tokens)
		if p.ExitAfterTERM != "" {
			fmt.Fprintf(w, "  SIGTERM: exit %s\n", p.ExitAfterTERM)
		}
		for _, s := range p.Samples {
			fmt.Fprintf(w, "  sample: %s\n", tail(s, 600))
		}
	}
	rep.Keys.print(w)
	fmt.Fprintf(w, "baseline: %s\nfinal:    %s\n", sortedF(rep.Baseline), sortedF(rep.Final))
	fmt.Fprintf(w, "phase 2 warm-up: %d/%d completed in %.0f s\n", rep.Warmup.Completed, rep.Warmup.Requests, rep.Warmup.Seconds)
	fmt.Fprintf(w, "RSS peak %s, final %s, spread over phase 2's last half (from %.0f s) %.1f%% (Go heap in use %s to %s, %d GC cycles)\n",
		mib(rep.RSSPeak), mib(rep.RSSFinal), rep.RSSLastHalfFrom, 100*rep.RSSLastHalfSpread, mib(rep.HeapLastHalf[0]), mib(rep.HeapLastHalf[1]),
		rep.GCsLastHalf[1]-rep.GCsLastHalf[0])
	fmt.Fprintf(w, "GC heap target over that half: %s to %s\n", mib(rep.NextGCLastHalf[0]), mib(rep.NextGCLastHalf[1]))
	for _, s := range rep.RSS {
		if int(s.T)%10 == 0 {
			fmt.Fprintf(w, "  t=%3.0fs phase %d: RSS %s, Go heap in use %s (sys %s, next GC at %s, %d GCs), KV blocks not free %d\n",
				s.T, s.Phase, mib(s.RSS), mib(s.HeapInuse), mib(s.HeapSys), mib(s.NextGC), s.GCs, s.KVUsed)
		}
	}
	if len(rep.Failures) == 0 {
		fmt.Fprintln(w, "PASS")
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(w, "FAIL:", f)
	}
}

func sorted(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}

func sortedF(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f", k, m[k])
	}
	return b.String()
}

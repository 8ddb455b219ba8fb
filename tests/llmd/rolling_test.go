package llmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chartPod is what the chart gives a Sluice pod (pickerconfig -pod): the
// serve flags the drain depends on and the readiness probe the kubelet
// runs.
type chartPod struct {
	Args           []string `json:"args"`
	ReadinessProbe struct {
		PeriodSeconds    int `json:"periodSeconds"`
		FailureThreshold int `json:"failureThreshold"`
		TimeoutSeconds   int `json:"timeoutSeconds"`
	} `json:"readinessProbe"`
	PreStopSleepSeconds           int `json:"preStopSleepSeconds"`
	TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
}

// renderPod renders it for the CPU values and set (JSON) over them.
func renderPod(t *testing.T, b bins, set string) chartPod {
	t.Helper()
	chart, err := filepath.Abs("../../deploy/k8s/chart/sluice")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(b.pickerconfig, "-chart", chart, "-f", "values-cpu.yaml", "-set", set, "-pod")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pickerconfig -pod: %v\n%s", err, stderr.String())
	}
	var p chartPod
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("pickerconfig -pod: %v", err)
	}
	// Kubernetes' defaults for what the chart leaves out.
	if p.ReadinessProbe.TimeoutSeconds == 0 {
		p.ReadinessProbe.TimeoutSeconds = 1
	}
	if p.ReadinessProbe.PeriodSeconds == 0 || p.ReadinessProbe.FailureThreshold == 0 || p.TerminationGracePeriodSeconds == 0 {
		t.Fatalf("the chart's pod has no readiness period, failure threshold or termination grace: %s", out)
	}
	return p
}

// flag is the value of --name in the chart's args.
func (p chartPod) flag(t *testing.T, name string) string {
	t.Helper()
	i := slices.Index(p.Args, "--"+name)
	if i < 0 || i+1 >= len(p.Args) {
		t.Fatalf("the chart gives serve no --%s: %v", name, p.Args)
	}
	return p.Args[i+1]
}

// drainArgs are the chart's drain flags, for replicas started here.
func (p chartPod) drainArgs(t *testing.T) []string {
	return []string{"--drain-delay", p.flag(t, "drain-delay"), "--shutdown-timeout", p.flag(t, "shutdown-timeout")}
}

// keyArgs are the chart's key flags: the test's key in place of the
// mounted key file, and the routes the chart opens to the picker without
// one (--metrics-public, --render-public).
func (p chartPod) keyArgs(t *testing.T) []string {
	if !slices.Contains(p.Args, "--api-key-file") {
		t.Fatalf("the chart's pod takes no key file: %v", p.Args)
	}
	out := []string{"--api-key", testKey}
	for _, f := range []string{"--metrics-public", "--render-public"} {
		if slices.Contains(p.Args, f) {
			out = append(out, f)
		}
	}
	return out
}

// kubelet plays what Kubernetes does for the picker's endpoints: it probes
// each replica's /ready as the chart's readinessProbe says (period,
// timeout, failures before not ready, one success before ready) and keeps
// the endpoints file the picker watches equal to the ready replicas, as
// the pod reconciler keeps its datastore equal to the ready pods. It knows
// nothing of a SIGTERM: a replica leaves only when its probe fails, the
// path a container restart (a failed liveness probe, an OOM kill) takes,
// where no deletion removes the pod first.
type kubelet struct {
	file   string
	port   int
	ips    []string
	probe  chartPod
	mu     sync.Mutex
	ready  map[string]bool
	change map[string]time.Time // each address's latest change of state
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newKubelet(t *testing.T, file string, pt ports, reps []*replica, pod chartPod) *kubelet {
	k := &kubelet{file: file, port: pt.http, probe: pod, ready: map[string]bool{}, change: map[string]time.Time{}, stop: make(chan struct{})}
	for _, r := range reps {
		k.ips = append(k.ips, r.ip)
		k.ready[r.ip] = true
	}
	k.write(t)
	return k
}

// write replaces the endpoints file in one rename (the picker's watcher
// follows it), so that it never reads a half-written list.
func (k *kubelet) write(t *testing.T) {
	var eps []any
	for i, ip := range k.ips {
		if k.ready[ip] {
			eps = append(eps, map[string]any{"name": fmt.Sprintf("sluice-%d", i), "address": ip, "port": strconv.Itoa(k.port)})
		}
	}
	if eps == nil {
		eps = []any{}
	}
	data, _ := json.Marshal(map[string]any{"endpoints": eps})
	tmp := k.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, k.file); err != nil {
		t.Error(err)
	}
}

func (k *kubelet) run(t *testing.T) {
	period := time.Duration(k.probe.ReadinessProbe.PeriodSeconds) * time.Second
	timeout := time.Duration(k.probe.ReadinessProbe.TimeoutSeconds) * time.Second
	hc := &http.Client{Timeout: timeout}
	for _, ip := range k.ips {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			fails := 0
			for {
				select {
				case <-k.stop:
					return
				case <-tick.C:
				}
				ok := false
				if resp, err := hc.Get(fmt.Sprintf("http://%s:%d/ready", ip, k.port)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					ok = resp.StatusCode == 200
				}
				if ok {
					fails = 0
				} else {
					fails++
				}
				k.mu.Lock()
				was := k.ready[ip]
				switch {
				case ok && !was:
					k.ready[ip] = true
				case !ok && was && fails >= k.probe.ReadinessProbe.FailureThreshold:
					k.ready[ip] = false
				}
				if k.ready[ip] != was {
					k.change[ip] = time.Now()
					k.write(t)
				}
				k.mu.Unlock()
			}
		}()
	}
}

func (k *kubelet) close() { close(k.stop); k.wg.Wait() }

// state is whether ip is among the endpoints, and since when.
func (k *kubelet) state(ip string) (bool, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ready[ip], k.change[ip]
}

// outcome is one streamed request of the load, as its client saw it.
type outcome struct {
	start, end time.Time
	upstream   string
	status     int    // 0: no response
	kind       string // ok, 5xx, refused (no response or another status), broken (200, no normal end)
	detail     string
}

// streamOnce sends one streaming chat completion and sorts its end: a
// stream is whole when its choice ends with a finish_reason, no error
// event came and [DONE] closed it.
func streamOnce(base string, body []byte) (o outcome) {
	o.start = time.Now()
	defer func() { o.end = time.Now() }()
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := client.Do(req)
	if err != nil {
		o.kind, o.detail = "refused", err.Error()
		return o
	}
	defer resp.Body.Close()
	o.status, o.upstream = resp.StatusCode, resp.Header.Get("x-sluice-upstream")
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		o.kind, o.detail = "refused", fmt.Sprintf("%d: %s", resp.StatusCode, b)
		if resp.StatusCode >= 500 {
			o.kind = "5xx"
		}
		return o
	}
	var finished, done bool
	var inBand string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			}
			Error *struct{ Message string }
		}
		if json.Unmarshal([]byte(line[6:]), &ev) != nil {
			continue
		}
		if ev.Error != nil {
			inBand = ev.Error.Message
		}
		for _, c := range ev.Choices {
			if c.FinishReason != nil && *c.FinishReason != "" {
				finished = true
			}
		}
	}
	switch {
	case sc.Err() != nil:
		o.kind, o.detail = "broken", "read: "+sc.Err().Error()
	case inBand != "":
		o.kind, o.detail = "broken", "in-band error: "+inBand
	case !finished || !done:
		o.kind, o.detail = "broken", fmt.Sprintf("finish_reason %v, [DONE] %v", finished, done)
	default:
		o.kind = "ok"
	}
	return o
}

// loadGen keeps n clients streaming through base, each sending its next
// request (a prompt of its own) as soon as the last one ends.
type loadGen struct {
	mu   sync.Mutex
	outs []outcome
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func startLoad(base string, n, tokens, seed int) *loadGen {
	g := &loadGen{stop: make(chan struct{})}
	for c := range n {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-g.stop:
					return
				default:
				}
				// A short prompt of its own: the load is many requests,
				// so that some arrive while a replica drains.
				body := chatBody([]msg{{"user", fmt.Sprintf("Request %d-%d-%d: name a %s.", seed, c, i, words[(c+i)%len(words)])}},
					tokens, true, map[string]any{"ignore_eos": true})
				o := streamOnce(base, body)
				g.mu.Lock()
				g.outs = append(g.outs, o)
				g.mu.Unlock()
			}
		}()
	}
	return g
}

func (g *loadGen) close() []outcome {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
	return g.snapshot()
}

// servedSince counts the requests host answered that started after t.
func (g *loadGen) servedSince(host string, t time.Time) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, o := range g.outs {
		if o.upstream == host && o.kind == "ok" && o.start.After(t) {
			n++
		}
	}
	return n
}

// drainFigures is one replica's restart.
type drainFigures struct {
	ip                      string
	unready                 time.Duration // SIGTERM to the kubelet dropping it from the endpoints
	lastRouted              time.Duration // SIGTERM to the start of the last request routed to the old process
	drained                 time.Duration // SIGTERM to the old process's exit (drain delay, open streams, engine stop)
	back                    time.Duration // SIGTERM to the new process's first answer through the router
	inFlightAtClose, served int           // requests the old process still had open when its listener closed; all it served after SIGTERM
}

// rollingRestart restarts each replica in turn under a steady streaming
// load through Envoy, as a rollout or a container restart would: SIGTERM,
// the old process drains and exits, a new one starts on the same address,
// and the next replica waits until the new one is ready and answering.
func rollingRestart(t *testing.T, b bins, rt *router, pt ports, reps []*replica, pod chartPod, k *kubelet, seed int) ([]outcome, []drainFigures) {
	t.Helper()
	const clients, tokens = 8, 16
	drainDelay, err := time.ParseDuration(pod.flag(t, "drain-delay"))
	if err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
	g := startLoad(rt.base, clients, tokens, seed)
	defer g.close()
	// Both replicas answering before the first restart.
	steady := time.Now()
	waitServed := func(host string, since time.Time, n int, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for g.servedSince(host, since) < n {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
		return true
	}
	for _, r := range reps {
		if !waitServed(r.hostPort(), steady, 1, 90*time.Second) {
			t.Fatalf("%s answered no load before the restarts; the load so far: %s", r.hostPort(), tally(g.snapshot()))
		}
	}
	var figs []drainFigures
	for i, r := range reps {
		old := r.p
		f := drainFigures{ip: r.ip}
		sig := time.Now()
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-old.done:
		case <-time.After(grace):
			// What the kubelet does at the end of the grace period.
			old.cmd.Process.Kill()
			<-old.done
			t.Errorf("%s outlived the chart's termination grace (%v): SIGKILL", r.ip, grace)
		}
		f.drained = time.Since(sig)
		if ready, at := k.state(r.ip); !ready && at.After(sig) {
			f.unready = at.Sub(sig)
		}
		g.mu.Lock()
		for _, o := range g.outs {
			if o.upstream != r.hostPort() || o.start.Before(sig) {
				continue
			}
			f.served++
			f.lastRouted = max(f.lastRouted, o.start.Sub(sig))
			if o.start.Before(sig.Add(drainDelay)) && o.end.After(sig.Add(drainDelay)) {
				f.inFlightAtClose++
			}
		}
		g.mu.Unlock()
		reps[i] = startReplica(t, b, r.ip, pt, pod.drainArgs(t)...)
		if !waitServed(r.hostPort(), reps[i].p.started, 1, 120*time.Second) {
			t.Fatalf("the new %s answered no routed request within 120 s:\n%s", r.ip, reps[i].p.tail())
		}
		for _, o := range g.snapshot() {
			if o.upstream == r.hostPort() && o.kind == "ok" && o.start.After(reps[i].p.started) &&
				(f.back == 0 || o.end.Sub(sig) < f.back) {
				f.back = o.end.Sub(sig)
			}
		}
		figs = append(figs, f)
	}
	return g.close(), figs
}

func (g *loadGen) snapshot() []outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]outcome(nil), g.outs...)
}

// TestRouterRollingRestart restarts both replicas, one after the other,
// under eight clients streaming through Envoy and the picker without a
// pause, with the chart's drain flags, readiness probe and termination
// grace (the kubelet above plays the probe and the endpoints), in the
// chart's default (approximate) prefix mode. Every stream must end whole:
// no 5xx, no request refused, no stream cut.
func TestRouterRollingRestart(t *testing.T) {
	b := binsFromEnv(t)
	pod := renderPod(t, b, "{}")
	pt := freePorts(t)
	reps := []*replica{startReplica(t, b, "127.0.0.1", pt, pod.drainArgs(t)...), startReplica(t, b, "127.0.0.2", pt, pod.drainArgs(t)...)}
	// Measured by then: SIGKILL at the end spares the cleanup's SIGTERM a
	// drain delay per replica (it would wait 5 s for each, then kill).
	defer func() {
		for _, r := range reps {
			r.p.cmd.Process.Kill()
		}
	}()
	for _, r := range reps {
		waitReady(t, r.p, r.base+"/ready", 3*time.Minute)
	}
	rt := &router{base: fmt.Sprintf("http://127.0.0.1:%d", pt.envoy)}
	rt.epp = startEPP(t, b, "rolling", pickerConfig(t, b, "approximate", pt, ""), pt, reps, true)
	rt.envoy = startEnvoy(t, b, pt)
	waitRouted(t, rt.base, rt)
	k := newKubelet(t, filepath.Join(b.logs, "endpoints.json"), pt, reps, pod)
	k.run(t)
	defer k.close()

	outs, figs := rollingRestart(t, b, rt, pt, reps, pod, k, 28)
	// Every request of the load, for a look at what the figures sum up.
	var tsv strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&tsv, "%s\t%.3f\t%s\t%s\t%s\n", o.start.Format("15:04:05.000"), o.end.Sub(o.start).Seconds(), o.upstream, o.kind, o.detail)
	}
	os.WriteFile(filepath.Join(b.logs, "rolling-requests.tsv"), []byte(tsv.String()), 0o644)
	kinds := map[string]int{}
	var bad []string
	for _, o := range outs {
		kinds[o.kind]++
		if o.kind != "ok" && len(bad) < 8 {
			bad = append(bad, fmt.Sprintf("%s at %s via %q: %s", o.kind, o.start.Format("15:04:05.000"), o.upstream, o.detail))
		}
	}
	var res []string
	res = append(res, fmt.Sprintf("| rolling restart of both replicas under 8 streaming clients (chart: %s drain delay, readiness every %d s, %d misses) | %d streams: %d whole, %d 5xx, %d refused, %d broken |",
		pod.flag(t, "drain-delay"), pod.ReadinessProbe.PeriodSeconds, pod.ReadinessProbe.FailureThreshold,
		len(outs), kinds["ok"], kinds["5xx"], kinds["refused"], kinds["broken"]))
	for _, f := range figs {
		res = append(res, fmt.Sprintf("| restart of %s: SIGTERM → out of the endpoints / last request routed to it / old process exited / new one answering | %.1f / %.1f / %.1f / %.1f s; it served %d after SIGTERM, %d open when its listener closed |",
			f.ip, f.unready.Seconds(), f.lastRouted.Seconds(), f.drained.Seconds(), f.back.Seconds(), f.served, f.inFlightAtClose))
	}
	for _, l := range res {
		t.Log(l)
	}
	appendResults(t, b, res)
	if len(bad) > 0 {
		t.Errorf("streams not whole during the rolling restart (first %d):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	drainDelay, _ := time.ParseDuration(pod.flag(t, "drain-delay"))
	for _, f := range figs {
		if f.lastRouted >= drainDelay {
			t.Errorf("%s: the picker sent a request %.1f s after SIGTERM, past the drain delay (%v) when the listener closes", f.ip, f.lastRouted.Seconds(), drainDelay)
		}
	}
}

// appendResults adds lines to results.md (TestRouter writes its header).
func appendResults(t *testing.T, b bins, lines []string) {
	path := filepath.Join(b.logs, "results.md")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Size() == 0 {
		fmt.Fprint(f, "| what | figure |\n|---|---|\n")
	}
	for _, l := range lines {
		fmt.Fprintln(f, l)
	}
}

// tally counts outcomes by kind and upstream, for a failure message.
func tally(outs []outcome) string {
	n := map[string]int{}
	var first []string
	for _, o := range outs {
		n[o.kind+" "+o.upstream]++
		if o.kind != "ok" && len(first) < 3 {
			first = append(first, o.detail)
		}
	}
	return fmt.Sprintf("%v; first failures %q", n, first)
}

package llmd

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// saturated fills one replica's queue past the picker's threshold (queue
// 5: ten endless streams sent to it directly, four running at --max-seqs
// 4, six waiting) and counts the requests sent through Envoy meanwhile
// that went to the other replica.
func saturated(t *testing.T, rt *router, reps []*replica, seed int) (shifted, total int) {
	t.Helper()
	busy, other := reps[0], reps[1]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream(ctx, busy.base, []msg{{"user", fmt.Sprintf("Count to ten thousand, stream %d-%d.", seed, i)}}, 2000, 0)
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := metrics(busy.base)
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := metric(m, "vllm:num_requests_waiting"); w >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never queued 5 requests", busy.base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The picker scrapes every 50 ms.
	time.Sleep(300 * time.Millisecond)
	for i, c := range newConvs(seed, 12) {
		res, err := chat(context.Background(), rt.base, []msg{{"system", c.system}, {"user", c.first}}, 2)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		total++
		if res.upstream == other.hostPort() {
			shifted++
		}
	}
	if m, _ := metrics(busy.base); m != nil {
		if w, _ := metric(m, "vllm:num_requests_waiting"); w < 5 {
			t.Errorf("the busy replica's queue fell to %v during the measurement: saturation did not hold", w)
		}
	}
	return shifted, total
}

// quantiles is p50 / p99 of a sample.
type quantiles struct{ p50, p99 time.Duration }

func (q quantiles) String() string {
	return fmt.Sprintf("%.1f / %.1f ms", float64(q.p50.Microseconds())/1000, float64(q.p99.Microseconds())/1000)
}

func quantilesOf(d []time.Duration) quantiles {
	if len(d) == 0 {
		return quantiles{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return quantiles{at(0.5), at(0.99)}
}

type latency struct{ ttft, itl quantiles }

// overhead streams the same kind of request to a replica directly and
// through Envoy and the picker, alternately, each prompt new (no cache
// hit on either path), and returns both paths' TTFT and ITL, and the
// median of the pairs' TTFT differences (routed minus direct, each pair
// sent back to back, so that the machine's load swings cancel more).
func overhead(t *testing.T, rt *router, reps []*replica, seed int) (direct, routed latency, added time.Duration) {
	t.Helper()
	const n, tokens = 12, 16
	var dt, rtt, di, ri, diff []time.Duration
	cs := newConvs(seed, 2*n)
	for i := range n {
		for j, base := range []string{reps[i%2].base, rt.base} {
			c := cs[2*i+j]
			tm, err := stream(context.Background(), base, []msg{{"system", c.system}, {"user", c.first}}, tokens, 0)
			if err != nil {
				t.Fatalf("stream %d via %s: %v", i, base, err)
			}
			if tm.generated != tokens {
				t.Fatalf("stream %d via %s: %d tokens generated (%d content chunks), want %d", i, base, tm.generated, tm.chunks, tokens)
			}
			if j == 0 {
				dt, di = append(dt, tm.ttft), append(di, tm.itl...)
			} else {
				rtt, ri = append(rtt, tm.ttft), append(ri, tm.itl...)
				diff = append(diff, tm.ttft-dt[len(dt)-1])
			}
		}
	}
	slices.Sort(diff)
	return latency{quantilesOf(dt), quantilesOf(di)}, latency{quantilesOf(rtt), quantilesOf(ri)}, diff[len(diff)/2]
}

// gone is what a disconnect at the edge cost: the worst time from the
// client closing its connection to the replica showing no running
// sequence and no KV block held (seen by polling its /metrics, so an upper
// bound), the replica's own abort-to-blocks-freed time
// (sluice_kv_reclaim_seconds, mean), and its decode step (the streams'
// ITL p50).
type gone struct{ edge, reclaim, step time.Duration }

func (g gone) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("%s edge to freed (polled), %s abort to freed in the replica; a decode step %s",
		ms(g.edge), ms(g.reclaim), ms(g.step))
}

// disconnect streams a long completion through Envoy, closes the client's
// connection after a few tokens and times how long the replica that served
// it takes to abort the sequence and free its blocks.
func disconnect(t *testing.T, rt *router, reps []*replica) gone {
	t.Helper()
	byHost := map[string]*replica{}
	for _, r := range reps {
		byHost[r.hostPort()] = r
	}
	var g gone
	var itl []time.Duration
	var reclaimSum, reclaimN float64
	for i, c := range newConvs(999, 3) {
		before := map[string]map[string]float64{}
		for _, r := range reps {
			before[r.base], _ = metrics(r.base)
		}
		tm, err := stream(context.Background(), rt.base, []msg{{"system", c.system}, {"user", c.first}}, 2000, 8)
		left := time.Now()
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		itl = append(itl, tm.itl...)
		r := byHost[tm.upstream]
		if r == nil {
			t.Fatalf("stream %d: upstream %q is no replica", i, tm.upstream)
		}
		for {
			m, err := metrics(r.base)
			if err != nil {
				t.Fatal(err)
			}
			run, _ := metric(m, "vllm:num_requests_running")
			usage, _ := metric(m, "vllm:kv_cache_usage_perc")
			if run == 0 && usage == 0 {
				break
			}
			if time.Since(left) > 5*time.Second {
				t.Fatalf("stream %d: %s still runs %v sequence(s), KV use %v, 5 s after the client left", i, r.base, run, usage)
			}
			time.Sleep(2 * time.Millisecond)
		}
		g.edge = max(g.edge, time.Since(left))
		after, err := metrics(r.base)
		if err != nil {
			t.Fatal(err)
		}
		count := func(m map[string]float64, name string) float64 { v, _ := metric(m, name); return v }
		n := count(after, "sluice_kv_reclaim_seconds_count") - count(before[r.base], "sluice_kv_reclaim_seconds_count")
		if n < 1 {
			t.Errorf("stream %d: %s recorded no abort-to-freed time: was the sequence aborted?", i, r.base)
		}
		reclaimN += n
		reclaimSum += count(after, "sluice_kv_reclaim_seconds_sum") - count(before[r.base], "sluice_kv_reclaim_seconds_sum")
	}
	if reclaimN > 0 {
		g.reclaim = time.Duration(reclaimSum / reclaimN * float64(time.Second))
	}
	g.step = quantilesOf(itl).p50
	return g
}

package llmd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// conversations per placement measurement: each is two turns, the second
// resending the first (and its reply) as its prefix.
const conversations = 16

// report collects the figures the test prints and writes to results.md.
type report struct {
	mu    sync.Mutex
	lines []string
}

func (r *report) add(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}

// TestRouter is the whole scenario on one pair of replicas, phase after
// phase (each phase's prompts are its own, so no phase profits from
// another's cache): placement by prefix in precise mode (KV events, render
// endpoints), in approximate mode and at random; the precise index after a
// picker restart, with the replay socket and without; placement with one
// replica saturated; what the routing layer adds to streaming; and a
// client leaving at the edge. The replicas want an API key, as the chart
// with keys sets them up: precise mode works only because the render
// routes are open to the picker (--render-public).
func TestRouter(t *testing.T) {
	b := binsFromEnv(t)
	pt := freePorts(t)
	// The chart's pod with API keys and the render routes open: the
	// picker sends no key on its scrapes and render calls, the clients do.
	keyed := renderPod(t, b, `{"apiKey":{"create":true,"keys":["k"],"renderPublic":true}}`).keyArgs(t)
	reps := []*replica{startReplica(t, b, "127.0.0.1", pt, keyed...), startReplica(t, b, "127.0.0.2", pt, keyed...)}
	for _, r := range reps {
		waitReady(t, r.p, r.base+"/ready", 3*time.Minute)
	}
	rep := &report{}
	defer func() {
		out := "| what | figure |\n|---|---|\n"
		for _, l := range rep.lines {
			out += l + "\n"
		}
		os.WriteFile(filepath.Join(b.logs, "results.md"), []byte(out), 0o644)
	}()

	// The picker reads the vLLM series by these names, each labelled with
	// the served model.
	m, err := metrics(reps[0].base)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info"} {
		if _, ok := metric(m, name); !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// vLLM labels its series with the served name (the first one).
	if names := modelNames(m); len(names) != 1 || !names[servedName] {
		t.Errorf("vllm: series' model_name %v, not the served name %q", keys(names), servedName)
	}

	precise := func() map[string]any { return pickerConfig(t, b, "precise", pt, reps[0].base) }
	approximate := func() map[string]any { return pickerConfig(t, b, "approximate", pt, "") }

	rt := &router{base: fmt.Sprintf("http://127.0.0.1:%d", pt.envoy)}
	rt.epp = startEPP(t, b, "precise", precise(), pt, reps, false)
	rt.envoy = startEnvoy(t, b, pt)
	waitRouted(t, rt.base, rt)
	restart := func(name string, cfg map[string]any) {
		t.Helper()
		rt.epp.stop(10 * time.Second)
		rt.epp = startEPP(t, b, name, cfg, pt, reps, false)
		waitRouted(t, rt.base, rt)
	}

	var phase int
	convs := func() []conv { phase++; return newConvs(phase, conversations) }

	t.Run("prefix/precise", func(t *testing.T) {
		// The subscriptions' proactive replay fills the index from the
		// replicas' first batch on.
		waitReplayed(t, rt.epp, 2)
		if n := subscribers(t, pt); n != 2 {
			t.Errorf("the picker subscribes to %v replicas' KV events, want 2", n)
		}
		h := placement(t, rt, convs(), nil)
		rep.add(t, "| prefix placement, precise (KV events + render) | %s |", h)
		h.require(t, 0.9)
		// Every prompt tokenized through a replica's render route, which
		// the picker calls without the key the replicas want.
		if n := strings.Count(rt.epp.sinceStart(), "tokenization failed"); n > 0 {
			t.Errorf("the picker failed to tokenize %d requests (render refused?):\n%s", n, rt.epp.tail())
		}
	})

	t.Run("picker-restart/replay", func(t *testing.T) {
		// Turn 1 before the restart, turn 2 after: only the replay socket
		// can tell the new picker where turn 1's blocks are.
		var resets int
		h := placement(t, rt, convs(), func() {
			// The replicas' replay buffers have rolled over by now: without
			// their sequence resets a replay from 0 would fail.
			resets = strings.Count(rt.epp.sinceStart(), "Detected event sequence reset")
			restart("precise-restarted", precise())
			waitReplayed(t, rt.epp, 2)
		})
		rep.add(t, "| second turn after a picker restart, precise with replay | %s |", h)
		rep.add(t, "| KV-event sequence resets (16-batch replay buffer) the picker had followed before its restart | %d |", resets)
		h.require(t, 0.9)
		if resets == 0 {
			t.Error("no replica's replay buffer rolled over before the restart: the replay shows less than it should")
		}
	})

	t.Run("picker-restart/no-replay", func(t *testing.T) {
		h := placement(t, rt, convs(), func() {
			restart("precise-noreplay", withoutReplay(t, precise()))
			// Both subscriptions made (and nothing to replay from).
			for subscribers(t, pt) != 2 {
				time.Sleep(50 * time.Millisecond)
			}
		})
		// Not a clean control: the second turns' own batches fill a replica's
		// 16-batch buffer, and its sequence reset re-announces every block
		// live, so this picker too relearns the first turns, from then on.
		rep.add(t, "| second turn after a picker restart, precise without replay (relearns at a replica's next sequence reset) | %s |", h)
	})

	t.Run("prefix/approximate", func(t *testing.T) {
		restart("approximate", approximate())
		h := placement(t, rt, convs(), nil)
		rep.add(t, "| prefix placement, approximate | %s |", h)
		h.require(t, 0.9)
	})

	t.Run("prefix/random", func(t *testing.T) {
		restart("random", randomPlacement(approximate()))
		h := placement(t, rt, convs(), nil)
		rep.add(t, "| prefix placement, random picker (baseline) | %s |", h)
	})

	t.Run("load", func(t *testing.T) {
		restart("precise-load", precise())
		shifted, total := saturated(t, rt, reps, phase+100)
		rep.add(t, "| requests sent to the other replica while one is saturated (queue ≥ 5) | %d/%d |", shifted, total)
		if shifted*10 < total*9 {
			t.Errorf("only %d of %d requests avoided the saturated replica", shifted, total)
		}
	})

	// Precise mode's picker renders each prompt on a replica (a round trip
	// and a tokenization) before it picks; approximate mode's does not.
	t.Run("streaming/precise", func(t *testing.T) {
		d, r, added := overhead(t, rt, reps, phase+200)
		rep.add(t, "| TTFT p50 / p99, direct → through Envoy + picker (precise) | %s → %s; median pair %+.1f ms |", d.ttft, r.ttft, ms(added))
		rep.add(t, "| ITL p50 / p99, direct → through Envoy + picker (precise) | %s → %s |", d.itl, r.itl)
	})

	t.Run("streaming/approximate", func(t *testing.T) {
		restart("approximate-streaming", approximate())
		d, r, added := overhead(t, rt, reps, phase+300)
		rep.add(t, "| TTFT p50 / p99, direct → through Envoy + picker (approximate) | %s → %s; median pair %+.1f ms |", d.ttft, r.ttft, ms(added))
		rep.add(t, "| ITL p50 / p99, direct → through Envoy + picker (approximate) | %s → %s |", d.itl, r.itl)
	})

	t.Run("disconnect", func(t *testing.T) {
		rep.add(t, "| client gone at Envoy → replica's sequence aborted, blocks freed | %s |", disconnect(t, rt, reps))
	})
}

// conv is one two-turn conversation with a prefix of its own.
type conv struct{ system, first, second string }

func newConvs(seed, n int) []conv {
	r := rand.New(rand.NewPCG(uint64(seed), 28))
	out := make([]conv, n)
	for i := range out {
		var w []string
		for range 48 {
			w = append(w, words[r.IntN(len(words))])
		}
		out[i] = conv{
			system: fmt.Sprintf("You are assistant %d-%d. Keep these words in mind, in order: %s.", seed, i, strings.Join(w, " ")),
			first:  "Which word comes first?",
			second: "And which one comes last?",
		}
	}
	return out
}

// words are the prompts' vocabulary.
var words = strings.Fields("river stone maple copper lantern harbor violet meadow thunder quartz falcon ember willow " +
	"canyon glacier orchid saffron tundra beacon cobalt prairie juniper sierra marble ivory comet delta fjord " +
	"garnet hazel iris jasper kelp lotus mango nectar onyx pebble quill raven sable tulip umber vesper")

// hits is a placement measurement: second turns on the replica that served
// the first, of all; and how the first turns spread over the replicas
// (all on one would make any placement look perfect).
type hits struct {
	same, total, cached int
	spread              map[string]int
	missed              []int // the conversations whose second turn went elsewhere
}

func (h hits) String() string {
	var s []string
	for k, v := range h.spread {
		s = append(s, fmt.Sprintf("%s:%d", k, v))
	}
	slices.Sort(s)
	out := fmt.Sprintf("%d/%d same replica (%.0f%%), %d/%d served from cache; first turns %s",
		h.same, h.total, 100*float64(h.same)/float64(h.total), h.cached, h.total, strings.Join(s, " "))
	if len(h.missed) > 0 && len(h.missed) < 4 {
		out += fmt.Sprintf("; missed %v", h.missed)
	}
	return out
}

func (h hits) require(t *testing.T, rate float64) {
	t.Helper()
	if float64(h.same) < rate*float64(h.total) {
		t.Errorf("second turns on the first's replica: %d of %d, want at least %.0f%%", h.same, h.total, 100*rate)
	}
	if len(h.spread) < 2 {
		t.Errorf("every first turn went to one replica (%v): placement shows nothing", h.spread)
	}
}

// placement sends every conversation's first turn, then (after between, if
// any) every second turn, through Envoy.
func placement(t *testing.T, rt *router, cs []conv, between func()) hits {
	t.Helper()
	ctx := context.Background()
	h := hits{spread: map[string]int{}}
	first := make([]result, len(cs))
	for i, c := range cs {
		res, err := chat(ctx, rt.base, []msg{{"system", c.system}, {"user", c.first}}, 4)
		if err != nil {
			t.Fatalf("first turn %d: %v", i, err)
		}
		first[i] = res
		h.spread[res.upstream]++
	}
	if between != nil {
		between()
	}
	// The second turns in another order than the first: sent in the same
	// order, a picker that only alternates by load would put each on its
	// first turn's replica too (a run whose render calls all failed, prefix
	// scores 0, placed 16/16 that way).
	order := rand.New(rand.NewPCG(uint64(len(cs)), 7)).Perm(len(cs))
	for _, i := range order {
		c := cs[i]
		res, err := chat(ctx, rt.base, []msg{{"system", c.system}, {"user", c.first},
			{"assistant", first[i].reply}, {"user", c.second}}, 4)
		if err != nil {
			t.Fatalf("second turn %d: %v", i, err)
		}
		h.total++
		if res.upstream == first[i].upstream {
			h.same++
		} else {
			h.missed = append(h.missed, i)
		}
		// More than the first turn's whole system prompt: a real hit.
		if res.cached >= 32 {
			h.cached++
		}
	}
	slices.Sort(h.missed)
	return h
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

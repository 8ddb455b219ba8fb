package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/metrics"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
	"github.com/sluicehq/sluice/tokenizer"
)

// These tests serve a tiny Qwen3.5 (GGUF qwen35: Gated DeltaNet layers with
// full attention every third) through loader.Load and the real server, as
// `sluice serve` wires it: the recurrent state per sequence lives in the
// engine's state slots, and /metrics shows them.

// hybridTiny: six layers, full attention at 2 and 5, DeltaNet with 2 key
// heads tiled over 4 value heads of 16.
var hybridTiny = modeltest.Qwen35Spec{Layers: 6, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, Interval: 3, KHeads: 2, VHeads: 4, StateSize: 16, ContextLen: 1024, Seed: 35}

// hybridSlotBytes is one slot of hybridTiny, figured from the spec: 4
// DeltaNet layers, each a convolution window of 3 rows of q|k|v channels
// ((2·2+4)·16) and 4 value heads' 16×16 state, in float32.
const hybridSlotBytes = 4 * 4 * (3*(2*2+4)*16 + 4*16*16)

// noEOG bans the tiny vocabulary's end tokens (<|endoftext|>, <|im_end|>),
// so a random model's greedy output runs to max_tokens.
const noEOG = `"logit_bias":{"0":-100,"2":-100}`

// hybridPrompt is 40-odd tokens once templated: past a block boundary, so a
// fork of n choices shares a checkpointed state.
const hybridPrompt = "Tell me about the river that runs under the old mill, and why it never freezes."

// gate is the engine's model with a hold: once armed, the at-th Forward
// call after arming blocks until released, so a test can act while a
// sequence is mid-prefill or mid-decode. It keeps the model's recurrent
// state interface (the loader refuses a wrapper that hides it).
type gate struct {
	engine.RecurrentModel
	mu      sync.Mutex
	at      int // Forward calls left before the hold; 0: disarmed
	entered chan struct{}
	release chan struct{}
}

func (g *gate) Forward(b *kernels.Batch) ([]float32, error) {
	g.mu.Lock()
	hold := false
	if g.at > 0 {
		g.at--
		hold = g.at == 0
	}
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.RecurrentModel.Forward(b)
}

// arm makes the at-th Forward call from now hold.
func (g *gate) arm(at int) {
	g.mu.Lock()
	g.at = at
	g.mu.Unlock()
}

type hybridRig struct {
	url   string
	model *loader.Model
	gate  *gate
	stats http.Handler // GET /metrics
}

// startHybrid serves hybridTiny as `sluice serve` does (loader, metrics
// observer and source, server): 4 sequences, 16-token steps, 64 blocks.
func startHybrid(t *testing.T) *hybridRig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35-tiny.gguf")
	if err := modeltest.WriteQwen35GGUF(path, hybridTiny, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	mx, err := metrics.New(prometheus.NewRegistry(), "qwen35-tiny", metrics.Options{NoRuntime: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &hybridRig{stats: mx.Handler()}
	m, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 64, MaxSeqs: 4, MaxBatchTokens: 16, Observer: mx,
		WrapModel: func(m engine.Model) engine.Model {
			r.gate = &gate{RecurrentModel: m.(engine.RecurrentModel), entered: make(chan struct{}), release: make(chan struct{})}
			return r.gate
		}})
	if err != nil {
		t.Fatal(err)
	}
	mx.SetSource(m.Engine.Stats)
	r.model = m
	cfg := server.DefaultConfig()
	cfg.ModelID = m.ID
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("GET /metrics", mx.Handler())
	if err := srv.SetBackend(m.Backend()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-served
		_ = m.Close(context.Background())
	})
	r.url = "http://" + ln.Addr().String()
	return r
}

func (r *hybridRig) post(ctx context.Context, t *testing.T, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// chatBody is a greedy chat request for hybridPrompt without end tokens.
func chatBody(extra string) string {
	return `{"model":"qwen35-tiny","messages":[{"role":"user","content":"` + hybridPrompt + `"}],"temperature":0,` + noEOG + `,` + extra + `}`
}

// chat runs a non-streamed chat request and returns each choice's content.
func (r *hybridRig) chat(t *testing.T, extra string) []string {
	t.Helper()
	resp := r.post(t.Context(), t, chatBody(extra))
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Index   int
			Message struct{ Content string }
			Finish  string `json:"finish_reason"`
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("chat: %d %s", resp.StatusCode, raw)
	}
	texts := make([]string, len(out.Choices))
	for _, c := range out.Choices {
		if c.Finish != "length" || c.Index < 0 || c.Index >= len(texts) {
			t.Fatalf("chat: choice %d finished %q: %s", c.Index, c.Finish, raw)
		}
		texts[c.Index] = c.Message.Content
	}
	return texts
}

// streamChat runs a streamed chat request and returns each choice's text,
// checking every choice ends on length and the stream on [DONE].
func (r *hybridRig) streamChat(t *testing.T, extra string) []string {
	t.Helper()
	resp := r.post(t.Context(), t, chatBody(`"stream":true,`+extra))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, raw)
	}
	var texts []string
	finished, done := 0, false
	for data := range sseData(resp.Body) {
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Index int
				Delta struct{ Content string }
				Fin   *string `json:"finish_reason"`
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Error != nil {
			t.Fatalf("stream event %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			for len(texts) <= ch.Index {
				texts = append(texts, "")
			}
			texts[ch.Index] += ch.Delta.Content
			if ch.Fin != nil {
				if *ch.Fin != "length" {
					t.Fatalf("choice %d finished %q", ch.Index, *ch.Fin)
				}
				finished++
			}
		}
	}
	if !done || finished != len(texts) {
		t.Fatalf("stream ended with [DONE] %v, %d of %d choices finished", done, finished, len(texts))
	}
	return texts
}

// sseData yields each event's data lines from an SSE body.
func sseData(body io.Reader) func(func(string) bool) {
	return func(yield func(string) bool) {
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && !yield(d) {
				return
			}
		}
	}
}

// TestQwen35Serve: greedy chat on the hybrid model is the same text
// non-streamed, streamed, as each of n=2 choices (which fork the state
// checkpointed at the prompt's last block boundary), and repeated (a
// prefix-cache hit that starts from a cached state); afterwards every
// state slot and block a sequence held is back.
func TestQwen35Serve(t *testing.T) {
	r := startHybrid(t)
	const n = `"max_tokens":12`
	want := r.chat(t, n)
	if len(want) != 1 || want[0] == "" {
		t.Fatalf("chat: %q", want)
	}
	if got := r.streamChat(t, n); len(got) != 1 || got[0] != want[0] {
		t.Errorf("streamed %q, non-streamed %q", got, want[0])
	}
	for _, got := range [][]string{r.chat(t, n+`,"n":2`), r.streamChat(t, n+`,"n":2`)} {
		if len(got) != 2 || got[0] != want[0] || got[1] != want[0] {
			t.Errorf("n=2: %q, each want %q", got, want[0])
		}
	}
	st := waitFree(t, r, 10*time.Second)
	if st.PrefixHitTokens == 0 {
		t.Errorf("repeats of one prompt hit no cached state: %+v", st.KV)
	}
}

// waitFree polls the engine's published figures until no sequence runs or
// waits and no block or state slot is held.
func waitFree(t *testing.T, r *hybridRig, within time.Duration) *engine.Stats {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := r.model.Engine.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.KV.Used == 0 && st.KV.StatesUsed == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("not free after %v: running %d waiting %d KV %+v", within, st.Running, st.Waiting, st.KV)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQwen35AbortReturnsState: a client that leaves mid-prefill or
// mid-decode gets its sequence aborted, and its state slot and blocks are
// back at the next step, as /metrics reads them; while it ran, /metrics
// showed its slot in use. The hybrid series carry the pool's figures.
func TestQwen35AbortReturnsState(t *testing.T) {
	r := startHybrid(t)
	if got := r.model.Net.(engine.RecurrentModel).StateSlotBytes(); got != hybridSlotBytes {
		t.Fatalf("slot bytes %d, want %d", got, hybridSlotBytes)
	}
	slots := r.model.Net.(engine.RecurrentModel).StateSlots()
	text, err := r.model.Tokenizer.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: hybridPrompt}}, true)
	if err != nil {
		t.Fatal(err)
	}
	prompt := len(r.model.Tokenizer.Encode(text, true))
	steps := (prompt + 15) / 16 // the prompt's steps of 16 tokens
	if steps < 3 {
		t.Fatalf("a %d-token prompt is prefilled in %d steps: too few to hold one in the middle", prompt, steps)
	}
	for i, c := range []struct {
		name   string
		hold   int  // the Forward call that holds
		decode bool // whether the held step decodes (else it prefills)
	}{
		{"mid-prefill", 2, false},
		{"mid-decode", steps + 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := r.model.Engine.Stats()
			r.gate.arm(c.hold)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp := r.post(ctx, t, chatBody(`"stream":true,"max_tokens":500`))
			select {
			case <-r.gate.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the engine never reached the held step")
			}
			// The snapshot is the step before the held one's.
			st := r.model.Engine.Stats()
			if pre, gen := st.PromptTokens-before.PromptTokens, st.GenTokens-before.GenTokens; c.decode != (gen > 0) || pre == 0 {
				t.Fatalf("held after %d prompt and %d sampled tokens of a %d-token prompt: not %s", pre, gen, prompt, c.name)
			}
			fams := metricstest.Scrape(t, r.stats)
			held := fams.Value(t, "sluice_state_slots", "state", "used")
			blocks := fams.Value(t, "sluice_kv_blocks_total") - fams.Value(t, "sluice_kv_blocks_free") - fams.Value(t, "sluice_kv_blocks_cached")
			if held < 1 || blocks < 1 {
				t.Errorf("held step: %v state slots and %v blocks in use, want both ≥ 1", held, blocks)
			}
			cancel() // the client leaves while the step runs
			_ = resp.Body.Close()
			// Let the server see the disconnect and queue the abort before the
			// step completes, so the abort lands at the next step.
			time.Sleep(50 * time.Millisecond)
			r.gate.release <- struct{}{}
			deadline := time.Now().Add(10 * time.Second)
			for {
				fams = metricstest.Scrape(t, r.stats)
				aborted := fams.Value(t, "sluice_requests_aborted_total", "cause", "client_disconnect")
				used := fams.Value(t, "sluice_state_slots", "state", "used")
				free := fams.Value(t, "sluice_kv_blocks_free") + fams.Value(t, "sluice_kv_blocks_cached")
				if aborted == float64(i+1) && used == 0 && free == fams.Value(t, "sluice_kv_blocks_total") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the abort: %v aborted, %v state slots used, %v of %v blocks free or cached", aborted, used,
						free, fams.Value(t, "sluice_kv_blocks_total"))
				}
				time.Sleep(5 * time.Millisecond)
			}
			if got := fams.Value(t, "sluice_state_slots", "state", "total"); got != float64(slots) {
				t.Errorf("sluice_state_slots{total} = %v, want the model's %d", got, slots)
			}
			if got := fams.Value(t, "sluice_state_slot_bytes"); got != hybridSlotBytes {
				t.Errorf("sluice_state_slot_bytes = %v, want %d", got, hybridSlotBytes)
			}
			if st := r.model.Engine.Stats(); st.GenTokens >= 500 || fams.Value(t, "sluice_state_slots", "state", "cached") != float64(st.KV.StatesCached) {
				t.Errorf("generated %d tokens; cached slots %+v", st.GenTokens, st.KV)
			}
		})
	}
}

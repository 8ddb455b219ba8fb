package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
)

// BenchmarkStatusStream is the status stream's cost to the engine: 16
// sequences decoding on the default model (2 threads) with 0, 1 and 50
// clients reading GET /v1/engine/events over loopback as fast as they can.
// The clients share the machine's cores with the loop, so their reading,
// the one JSON encoding per frame and the 50 writes all count. step-ms is
// the loop's mean step (schedule → deliver); loop-ms/step is wall time per
// step, which adds the time between steps where the frame is built and
// published; decode-tok/s is the aggregate output rate. On a shared machine
// those swing with other work; cpu-ms/step, the process's CPU time (loop,
// backend threads, hub, handlers and the 50 readers) per step, is the
// steadier figure of what the stream adds.
//
//	go test ./server/web -run '^$' -bench StatusStream -benchtime 4x
func BenchmarkStatusStream(b *testing.B) {
	path := filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("default model absent (make model): %v", err)
	}
	const seqs, plen, gen, blocks = 16, 16, 64, 16 * 6
	src, err := models.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	be := cpu.New(2)
	defer be.Close()
	m, err := models.Load(src, be, models.Options{KVBlocks: blocks, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: seqs})
	if err != nil {
		b.Fatal(err)
	}
	for _, watchers := range []int{0, 1, 50} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			e, err := engine.New(m, engine.Config{Blocks: blocks, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: seqs, MaxQueue: seqs})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			w := New(nil)
			w.Attach(e)
			ts := newServer(b, w)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range watchers {
				req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/engine/events", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					defer resp.Body.Close()
					_, _ = io.Copy(io.Discard, resp.Body)
				})
			}
			waitClientsB(b, w, watchers)
			st0, start, cpu0 := e.Stats(), time.Now(), processCPU()
			tokens := 0
			for b.Loop() {
				ss := make([]*engine.Sequence, seqs)
				for i := range ss {
					p := make([]int32, plen)
					for j := range p {
						p[j] = int32(100 + 31*i + 7*j)
					}
					if ss[i], err = e.Submit(ctx, engine.Request{Prompt: p, MaxTokens: gen}); err != nil {
						b.Fatal(err)
					}
				}
				for _, s := range ss {
					for range s.Tokens() {
						tokens++
					}
				}
			}
			wall, cpu := time.Since(start), processCPU()-cpu0
			st := e.Stats()
			steps := float64(st.Steps - st0.Steps)
			b.ReportMetric((st.BusyTime-st0.BusyTime).Seconds()*1000/steps, "step-ms")
			b.ReportMetric(wall.Seconds()*1000/steps, "loop-ms/step")
			b.ReportMetric(float64(tokens)/wall.Seconds(), "decode-tok/s")
			b.ReportMetric(cpu.Seconds()*1000/steps, "cpu-ms/step")
			cancel()
			wg.Wait()
		})
	}
}

// waitClientsB waits until the hub counts n clients, without a test's
// context (benchmarks run it before timing).
func waitClientsB(b *testing.B, w *Web, n int) {
	b.Helper()
	deadline := time.After(30 * time.Second)
	for {
		w.hub.mu.Lock()
		c := w.hub.clients
		w.hub.mu.Unlock()
		if c == n {
			return
		}
		select {
		case <-w.hub.cur.Load().next:
		case <-deadline:
			b.Fatalf("hub has %d clients, want %d", c, n)
		}
	}
}

// BenchmarkEncodeStatus is the hub's per-frame work off the loop: one JSON
// encoding of a frame with 16 live sequences of 6 blocks and 32 recent
// ends, shared by every client.
func BenchmarkEncodeStatus(b *testing.B) {
	st := &engine.Status{Frame: 1, BlockSize: 16, StepDecodeTokens: 16}
	st.At = time.Now()
	for i := range 16 {
		st.Seqs = append(st.Seqs, engine.StatusSeq{ID: uint64(i), Running: true, Prompt: 40, Tokens: 90, Computed: 89, Cached: 16, Blocks: []int32{1, 2, 3, 4, 5, 6}})
	}
	for i := range 32 {
		st.Ends = append(st.Ends, engine.StatusEnd{N: uint64(i), ID: uint64(i), At: st.At, Finish: engine.FinishAbort, Cause: engine.CauseClientDisconnect, Blocks: 5, Reclaim: time.Millisecond})
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(encodeStatus(st))
	}
	b.ReportMetric(float64(n), "bytes/frame")
}

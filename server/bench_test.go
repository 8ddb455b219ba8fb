package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// benchPieces are typical token texts: ASCII words, punctuation, a newline
// (escaped in JSON), and multi-byte CJK and emoji.
var benchPieces = []string{" The", " quick", " brown", " fox", ",", " jumps", "\n", " 日本", "語", " 🎉", " over", " the", " lazy", " dog", "."}

// discardWriter is an http.ResponseWriter that drops the body: the
// benchmark then measures encode + frame + buffer, not a socket.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// BenchmarkWriterPerToken is the stream writer's cost for one token:
// detokenize (a table lookup here) + stop-string hold-back + JSON chunk +
// SSE frame + event log + write + flush. "memory" writes into a discarding
// ResponseWriter; "loopback" writes each token through a real HTTP/1.1
// response on a loopback TCP socket (one write and flush syscall per token,
// as with --flush-interval 0), with a client draining it.
func BenchmarkWriterPerToken(b *testing.B) {
	for _, stops := range [][]string{nil, {"END", "\n\nUser:"}} {
		name := "no-stop"
		if stops != nil {
			name = "2-stops"
		}
		b.Run("memory/"+name, func(b *testing.B) {
			benchWriter(b, &discardWriter{h: http.Header{}}, stops)
		})
	}
	b.Run("loopback/no-stop", func(b *testing.B) {
		w, done := loopbackWriter(b)
		defer done()
		benchWriter(b, w, nil)
	})
}

func benchWriter(b *testing.B, w http.ResponseWriter, stops []string) {
	v := streamtest.NewPieceVocab()
	ids := v.IDs(benchPieces...)
	f := newChunkFormat(true, "chatcmpl-0123456789abcdef01234567", "SmolLM2-135M-Instruct.Q4_1", time.Now().Unix())
	log := httpedge.NewEventLog(1 << 20)
	sw := newSSEWriter(context.Background(), w, log, &f, 30*time.Second, 0)
	ts := stream.NewTextStream(v.NewDetokenizer(), stops)
	bytes := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		text, _ := ts.Push(ids[i%len(ids)])
		i++
		if text != "" {
			_ = sw.Text(text, nil)
		}
		if err := sw.Flush(); err != nil {
			b.Fatal(err)
		}
		bytes = log.Size()
		if len(ts.IDs()) > 1<<16 { // keep the id list from growing without bound
			ts = stream.NewTextStream(v.NewDetokenizer(), stops)
		}
	}
	_ = bytes
}

// loopbackWriter returns the ResponseWriter of a live HTTP response on a
// loopback socket whose client reads and discards everything.
func loopbackWriter(b *testing.B) (http.ResponseWriter, func()) {
	got := make(chan http.ResponseWriter)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSSEHeaders(w, "bench")
		got <- w
		<-release
	}))
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext}
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	w := <-got
	return w, func() { close(release); srv.Close() }
}

// BenchmarkPump measures the whole per-stream path for a 256-token stream:
// channel receive, timers, TextStream, SSE framing, event log, flush, in ns
// and allocations per token. "caught-up": tokens arrive one at a time (an
// unbuffered channel fed by a goroutine), so each becomes its own event and
// flush, as when the model is slower than the writer. "behind": all tokens
// already wait, and the writer sends what is ready as one event.
func BenchmarkPump(b *testing.B) {
	const n = 256
	v := streamtest.NewPieceVocab()
	ids := v.IDs(benchPieces...)
	cfg := stream.PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second}
	w := &discardWriter{h: http.Header{}}
	for _, mode := range []string{"caught-up", "behind"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				seq := &readySeq{ch: make(chan engine.Token, n)}
				if mode == "caught-up" {
					seq.ch = make(chan engine.Token)
				}
				go func() {
					for i := range n {
						seq.ch <- engine.Token{ID: ids[i%len(ids)], Index: i}
					}
					close(seq.ch)
				}()
				f := newChunkFormat(true, "chatcmpl-0123456789abcdef01234567", "m", 0)
				sw := newSSEWriter(context.Background(), w, httpedge.NewEventLog(1<<20), &f, 30*time.Second, 0)
				gen, _ := stream.Submit(context.Background(), readyEngine{seq}, engine.Request{}, true)
				stream.Pump(gen, stream.NewTextStream(v.NewDetokenizer(), nil), sw, cfg, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
	}
}

// readySeq is a finished sequence whose tokens all wait in its channel.
type readySeq struct{ ch chan engine.Token }

// admittedAlready is a closed channel: a readySeq was admitted long ago.
var admittedAlready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (s *readySeq) Tokens() <-chan engine.Token { return s.ch }
func (s *readySeq) Admitted() <-chan struct{}   { return admittedAlready }
func (s *readySeq) Progress() <-chan struct{}   { return nil }

// readyEngine hands out its one sequence.
type readyEngine struct{ seq *readySeq }

func (e readyEngine) Submit(context.Context, engine.Request) (stream.Sequence, error) {
	return e.seq, nil
}
func (e readyEngine) MaxSequenceLen() int   { return 1 << 20 }
func (s *readySeq) Result() engine.Result   { return engine.Result{Finish: engine.FinishStop} }
func (s *readySeq) Abort(engine.AbortCause) {}

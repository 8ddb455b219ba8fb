package relay_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkRelayPerToken is the relay's own cost per token: an upstream that
// writes 256 one-token chunks as fast as the socket takes them, read by a
// client directly ("direct") and through the relay ("relay": SSE parse, text
// join, stop hold-back, re-framing, event log, a write and flush per chunk).
// The difference per token is what the relay adds; both include the client's
// read on the same cores.
func BenchmarkRelayPerToken(b *testing.B) {
	const tokens = 256
	var stream bytes.Buffer
	stream.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	for i := range tokens {
		fmt.Fprintf(&stream, "id: %d\ndata: {\"id\":\"up\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word%d\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i+2, i)
	}
	stream.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	frames := bytes.SplitAfter(stream.Bytes(), []byte("\n\n"))
	up := newFake(b, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, fr := range frames {
			_, _ = w.Write(fr)
			w.(http.Flusher).Flush()
		}
	})
	go func() {
		for range up.bodies { // the fake records bodies; nobody reads them here
		}
	}()
	rig := newRelay(b, up, fast)
	for _, tc := range []struct{ name, url string }{{"direct", up.URL}, {"relay", rig.url}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				resp, err := http.Post(tc.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n == 0 {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*tokens)/1000, "µs/token")
		})
	}
}

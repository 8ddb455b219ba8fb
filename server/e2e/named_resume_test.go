package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// namedAPI is what the resume test needs to know of an API's stream.
type namedAPI struct {
	path, body string
	delta      func(t *testing.T, ev ssetest.Event) string // the text an event adds
	last       string                                      // the name of the stream's last event
}

var namedAPIs = map[string]namedAPI{
	"messages": {
		path: "/v1/messages",
		body: `{"max_tokens":80,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Tell me a long story about a dragon and a knight."}]}`,
		delta: func(t *testing.T, ev ssetest.Event) string {
			if ev.Name != "content_block_delta" {
				return ""
			}
			var d struct{ Delta struct{ Text string } }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatalf("%s: %v", ev.Data, err)
			}
			return d.Delta.Text
		},
		last: "message_stop",
	},
	"responses": {
		path:  "/v1/responses",
		body:  `{"max_output_tokens":80,"temperature":0,"stream":true,"store":false,"input":"Tell me a long story about a dragon and a knight."}`,
		delta: responsesDelta("response.output_text.delta"),
		last:  "response.incomplete", // max_output_tokens ends this story
	},
}

// TestNamedStreamResume: a Messages or Responses stream whose client drops
// mid-generation is resumed with the same POST carrying X-Sluice-Stream-Id
// and Last-Event-ID. The events after the cut arrive with consecutive ids,
// the joined text equals an uninterrupted greedy run's, and the engine
// sampled exactly as many tokens as that one run: what was produced before
// the cut is replayed or continued from, never generated again. A reconnect
// after the stream ended is a pure replay: no sequence, no token.
func TestNamedStreamResume(t *testing.T) {
	r := getRig(t)
	for name, api := range namedAPIs {
		t.Run(name, func(t *testing.T) {
			r.waitIdle(t, 5*time.Second)
			join := func(evs []ssetest.Event) string {
				var b strings.Builder
				for _, ev := range evs {
					b.WriteString(api.delta(t, ev))
				}
				return b.String()
			}
			before := *r.stats()
			resp := r.post(t, api.path, api.body)
			whole := ssetest.ReadNamed(t, bufio.NewReader(resp.Body), 0)
			resp.Body.Close()
			once := r.waitIdle(t, 5*time.Second)
			sampled := once.GenTokens - before.GenTokens
			wantText := join(whole)
			if len(whole) == 0 || whole[len(whole)-1].Name != api.last || wantText == "" {
				t.Fatalf("uninterrupted stream: %d events, text %q", len(whole), wantText)
			}

			// Cut after the third text delta: mid-generation.
			resp = r.post(t, api.path, api.body)
			id := resp.Header.Get("X-Sluice-Stream-Id")
			br := bufio.NewReader(resp.Body)
			var first []ssetest.Event
			for deltas := 0; deltas < 3; {
				ev := ssetest.ReadNamed(t, br, 1)
				if len(ev) == 0 {
					t.Fatal("stream ended before three deltas")
				}
				first = append(first, ev...)
				if api.delta(t, ev[0]) != "" {
					deltas++
				}
			}
			resp.Body.Close() // the client vanishes
			cut := r.waitIdle(t, 5*time.Second)
			last := first[len(first)-1].ID
			rest := resume(t, r, api, id, last)
			for i, ev := range rest {
				if ev.ID != last+1+int64(i) {
					t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
				}
			}
			after := r.waitIdle(t, 5*time.Second)
			all := append(first, rest...)
			if got := join(all); got != wantText || all[len(all)-1].Name != api.last {
				t.Fatalf("resumed text %q (last event %s)\nuninterrupted %q", got, all[len(all)-1].Name, wantText)
			}
			if got := after.GenTokens - once.GenTokens; got != sampled {
				t.Errorf("interrupted and resumed, the engine sampled %d tokens; one run samples %d", got, sampled)
			}
			t.Logf("cut after event %d (%d tokens sampled by then, %d sequences); resumed with %d events",
				last, cut.GenTokens-once.GenTokens, after.Finished-once.Finished, len(rest))

			// The stream has ended: a reconnect replays, generating nothing.
			again := resume(t, r, api, id, 2)
			end := r.waitIdle(t, 5*time.Second)
			if join(again) != join(all[2:]) || end.GenTokens != after.GenTokens || end.Finished != after.Finished {
				t.Errorf("replay after the end: %d events, %d tokens and %d sequences more", len(again),
					end.GenTokens-after.GenTokens, end.Finished-after.Finished)
			}
		})
	}
}

func resume(t *testing.T, r *rig, api namedAPI, id string, last int64) []ssetest.Event {
	t.Helper()
	resp := r.post(t, api.path, api.body, "X-Sluice-Stream-Id", id, "Last-Event-ID", strconv.FormatInt(last, 10))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resume: %s %s", resp.Status, b)
	}
	return ssetest.ReadNamed(t, bufio.NewReader(resp.Body), 0)
}

// TestNamedStreamResumeErrors: an unknown stream and a Last-Event-ID that
// is not an id are refused in each API's error shape.
func TestNamedStreamResumeErrors(t *testing.T) {
	r := getRig(t)
	for name, api := range namedAPIs {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				id, last string
				status   int
			}{
				{"msg_nosuch", "3", http.StatusNotFound},
				{"resp_nosuch", "x", http.StatusNotFound},
			} {
				resp := r.post(t, api.path, api.body, "X-Sluice-Stream-Id", c.id, "Last-Event-ID", c.last)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status || !strings.Contains(string(b), `"error"`) {
					t.Errorf("%s after %s: %s %s", c.id, c.last, resp.Status, b)
				}
			}
		})
	}
}

// responsesDelta is a Responses stream's delta func: the delta of each event
// of type kind. Every event's sequence_number must follow its id (numbers
// from 0, ids from 1), both going on across the reconnect.
func responsesDelta(kind string) func(t *testing.T, ev ssetest.Event) string {
	return func(t *testing.T, ev ssetest.Event) string {
		var d struct {
			Type  string
			Seq   int `json:"sequence_number"`
			Delta string
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatalf("%s: %v", ev.Data, err)
		}
		if d.Seq != int(ev.ID-1) {
			t.Fatalf("event %d has sequence_number %d", ev.ID, d.Seq)
		}
		if d.Type != kind {
			return ""
		}
		return d.Delta
	}
}

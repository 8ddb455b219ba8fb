package server

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestResume cuts a stream after some events, reconnects with the response
// id and Last-Event-ID, and checks that exactly the missing events arrive,
// that the generation continued (not restarted) from the tokens already
// produced, and that the result equals an uninterrupted stream.
func TestResume(t *testing.T) {
	script := foxScript()
	tests := []struct {
		name   string
		cutAt  int // events read before the disconnect
		viaGET bool
	}{
		{"GET /v1/streams/{id}", 5, true},
		{"same POST with headers", 5, false},
		{"cut right after the role chunk", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig := newRig(t, script, 5*time.Millisecond, nil)
			body := fmt.Sprintf(chatBody, "", true, `,"stream_options":{"include_usage":true}`)
			whole := ssetest.Read(t, bufio.NewReader(rig.post(t, "/v1/chat/completions", body).Body), 0)
			wantText, _, _, wantUsage := contentOf(t, whole)

			id, first := cutChat(t, rig, body, tt.cutAt)
			last := first[len(first)-1].ID

			again := resumeChat(t, rig, body, id, last, tt.viaGET)
			if again.StatusCode != 200 {
				t.Fatalf("resume status %d", again.StatusCode)
			}
			rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
			if len(rest) == 0 {
				t.Fatalf("no events after resume; submits %d aborts %v produced %d", len(rig.eng.Submits()), rig.eng.Aborts(), rig.eng.Produced())
			}
			for i, ev := range rest {
				if ev.ID != last+1+int64(i) {
					t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
				}
			}
			text, finish, _, usage := contentOf(t, append(first, rest...))
			if text != wantText || finish != "stop" {
				t.Fatalf("resumed text %q (%s), uninterrupted %q; resumed events %v", text, finish, wantText, rest)
			}
			if *usage != *wantUsage {
				t.Errorf("usage %+v, uninterrupted %+v", usage, wantUsage)
			}
			subs := rig.eng.Submits()
			if len(subs) != 3 || *subs[2].Sampling.Seed != *subs[1].Sampling.Seed {
				t.Fatalf("%d submits; want the resume to reuse the seed", len(subs))
			}
			if n := len(subs[2].Resume); !slices.Equal(subs[2].Resume, rig.eng.Script[:n]) {
				t.Errorf("Resume %v is not the script's first %d tokens", subs[2].Resume, n)
			}
			// The disconnect aborted the first sequence, and nothing was generated twice.
			if !slices.Equal(rig.eng.Aborts(), []engine.AbortCause{engine.CauseClientDisconnect}) {
				t.Errorf("aborts %v", rig.eng.Aborts())
			}
			if got := rig.eng.Produced(); got != 2*len(script) {
				t.Errorf("engine produced %d tokens for two streams of %d", got, len(script))
			}
		})
	}
}

// TestResumeFinishedStream replays the tail of a stream that ended while its
// client was away: no second generation.
func TestResumeFinishedStream(t *testing.T) {
	rig := newRig(t, []string{"a", "b", "c"}, time.Millisecond, nil)
	resp := rig.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	id := resp.Header.Get(streamIDHeader)
	all := ssetest.Read(t, bufio.NewReader(resp.Body), 0)
	tests := []struct {
		last   string
		status int
		want   int // events replayed
	}{
		{"2", 200, len(all) - 2},
		{"0", 200, len(all)},
		{fmt.Sprint(len(all)), 200, 0},
		{fmt.Sprint(len(all) + 1), 409, 0},
		{"x", 400, 0},
	}
	for _, tt := range tests {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", rig.url+"/v1/streams/"+id, nil)
		req.Header.Set(lastEventIDHeader, tt.last)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode != tt.status {
			t.Errorf("Last-Event-ID %s: status %d, want %d", tt.last, r.StatusCode, tt.status)
		}
		if r.StatusCode == 200 {
			got := ssetest.Read(t, bufio.NewReader(r.Body), 0)
			if len(got) != tt.want || (len(got) > 0 && got[len(got)-1] != all[len(all)-1]) {
				t.Errorf("Last-Event-ID %s: %d events, want %d", tt.last, len(got), tt.want)
			}
		}
		r.Body.Close()
	}
	if n := len(rig.eng.Submits()); n != 1 {
		t.Errorf("%d submits, want 1", n)
	}
}

// TestResumeAfterLastToken: the disconnect raced the last token (every token
// of max_tokens was produced, yet the engine reports the abort). A resume
// then only adds the ending; nothing is submitted again.
func TestResumeAfterLastToken(t *testing.T) {
	rig := newRig(t, []string{"a", "b", "c"}, time.Millisecond, nil)
	rig.eng.Finish, rig.eng.Cause = engine.FinishAbort, engine.CauseClientDisconnect
	resp := rig.post(t, "/v1/completions", `{"prompt":"x","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	id := resp.Header.Get(streamIDHeader)
	first := ssetest.Read(t, bufio.NewReader(resp.Body), 0) // ends without [DONE]: the stream was cut short
	if len(first) == 0 || first[len(first)-1].Data == "[DONE]" {
		t.Fatalf("first connection got %v", first)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", rig.url+"/v1/streams/"+id, nil)
	req.Header.Set(lastEventIDHeader, strconv.FormatInt(first[len(first)-1].ID, 10))
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	text, finish, _, usage := contentOf(t, append(first, rest...))
	if text != "abc" || finish != "length" || usage == nil || usage.CompletionTokens != 3 {
		t.Errorf("text %q finish %q usage %+v", text, finish, usage)
	}
	if n := len(rig.eng.Submits()); n != 1 {
		t.Errorf("%d submits, want 1", n)
	}
}

// resumeChat reconnects to chat stream id after event last, as a client
// does: by GET /v1/streams/{id}, or by the same POST with the stream id and
// Last-Event-ID headers.
func resumeChat(t *testing.T, rig *testRig, body, id string, last int64, viaGET bool) *http.Response {
	t.Helper()
	if !viaGET {
		return rig.post(t, "/v1/chat/completions", body, streamIDHeader, id, lastEventIDHeader, strconv.FormatInt(last, 10))
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", rig.url+"/v1/streams/"+id, nil)
	req.Header.Set(lastEventIDHeader, strconv.FormatInt(last, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// foxScript is the engine script of the resume tests: a word a token,
// enough tokens that a cut stream is still generating.
func foxScript() []string {
	script := strings.Split("The quick brown fox jumps over the lazy dog again and again.", " ")
	for i := range script[1:] {
		script[i+1] = " " + script[i+1]
	}
	return script
}

// cutChat posts body, reads n events and drops the connection, as a client
// that vanishes mid-stream: the stream's id and the events it got.
func cutChat(t *testing.T, rig *testRig, body string, n int) (string, []ssetest.Event) {
	t.Helper()
	resp := rig.post(t, "/v1/chat/completions", body)
	id := resp.Header.Get(streamIDHeader)
	first := ssetest.Read(t, bufio.NewReader(resp.Body), n)
	resp.Body.Close()
	return id, first
}

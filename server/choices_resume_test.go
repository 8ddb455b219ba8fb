package server

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestChoicesResume cuts an n=3 stream mid-generation and reconnects with
// its id and Last-Event-ID: exactly the missing events arrive, with
// consecutive ids, every choice continues from its own tokens with its own
// seed (never restarted), and the joined stream equals an uninterrupted
// one, usage included. A reconnect after the end replays and generates
// nothing.
func TestChoicesResume(t *testing.T) {
	script := foxScript()
	for _, tt := range []struct {
		name   string
		cutAt  int
		viaGET bool
	}{{"same POST with headers", 9, false}, {"GET /v1/streams/{id}", 9, true}, {"cut after the roles", 3, false}} {
		t.Run(tt.name, func(t *testing.T) {
			rig := newRig(t, script, 5*time.Millisecond, nil)
			body := fmt.Sprintf(chatBody, "", true, `,"n":3,"seed":40,"stream_options":{"include_usage":true}`)
			wantText, _, wantFinish, wantUsage := choicesOfEvents(t, ssetest.Read(t, bufio.NewReader(rig.post(t, "/v1/chat/completions", body).Body), 0))

			id, first := cutChat(t, rig, body, tt.cutAt)
			last := first[len(first)-1].ID
			again := resumeChat(t, rig, body, id, last, tt.viaGET)
			if again.StatusCode != 200 || again.Header.Get(streamIDHeader) != id {
				t.Fatalf("resume status %d, stream id %q (want %q)", again.StatusCode, again.Header.Get(streamIDHeader), id)
			}
			rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
			for i, ev := range rest {
				if ev.ID != last+1+int64(i) {
					t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
				}
			}
			text, _, finish, usage := choicesOfEvents(t, append(first, rest...))
			for i := range 3 {
				if text[i] != wantText[i] || finish[i] != wantFinish[i] || finish[i] != "stop" {
					t.Errorf("choice %d: %q (%s), uninterrupted %q (%s)", i, text[i], finish[i], wantText[i], wantFinish[i])
				}
			}
			if usage == nil || *usage != *wantUsage {
				t.Errorf("usage %+v, uninterrupted %+v", usage, wantUsage)
			}
			// Submits: 3 for the whole run, 3 for the cut one, then one
			// continuation per choice unfinished at the cut, each with that
			// choice's seed and its tokens so far.
			subs := rig.eng.Submits()
			// 12 tokens 5 ms apart: no choice has finished at the cut.
			if len(subs) != 9 {
				t.Fatalf("%d submits, want 3+3 and 3 continuations", len(subs))
			}
			for _, c := range subs[6:] {
				// Cut right after the roles, a choice may not have had its
				// first token yet (a loaded machine): it continues from no
				// tokens, with its seed. After 9 events every choice has some.
				if (len(c.Resume) == 0 && tt.cutAt > 3) || !slices.Equal(c.Resume, rig.eng.Script[:len(c.Resume)]) {
					t.Errorf("continuation Resume %v is not a prefix of the script", c.Resume)
				}
				if s := *c.Sampling.Seed; s < 40 || s > 42 {
					t.Errorf("continuation seed %d, want a choice's own (40-42)", s)
				}
			}
			aborts := rig.eng.Aborts()
			if len(aborts) != len(subs)-6 || slices.ContainsFunc(aborts, func(c engine.AbortCause) bool { return c != engine.CauseClientDisconnect }) {
				t.Errorf("aborts %v for %d continuations", aborts, len(subs)-6)
			}
			if got := rig.eng.Produced(); got != 2*3*len(script) {
				t.Errorf("engine produced %d tokens for two streams of 3×%d", got, len(script))
			}
			// After the end: the replay only, nothing submitted.
			tail := rig.post(t, "/v1/chat/completions", body, streamIDHeader, id, lastEventIDHeader, strconv.FormatInt(last, 10))
			if got := ssetest.Read(t, bufio.NewReader(tail.Body), 0); len(got) != len(rest) {
				t.Errorf("second reconnect replayed %d events, want %d", len(got), len(rest))
			}
			tail.Body.Close()
			if n := len(rig.eng.Submits()); n != len(subs) {
				t.Errorf("the reconnect after the end submitted %d more", n-len(subs))
			}
			if n := rig.eng.Live(); n != 0 {
				t.Errorf("%d sequences still live", n)
			}
		})
	}
}

// TestChoicesResumeAfterLastToken: every choice's disconnect raced its last
// token (all of max_tokens produced, yet the engine reports the abort). A
// resume then only adds each choice's ending, the usage and [DONE];
// nothing is submitted again.
func TestChoicesResumeAfterLastToken(t *testing.T) {
	rig := newRig(t, []string{"a", "b", "c"}, time.Millisecond, nil)
	rig.eng.Finish, rig.eng.Cause = engine.FinishAbort, engine.CauseClientDisconnect
	resp := rig.post(t, "/v1/completions", `{"prompt":"x","max_tokens":3,"n":2,"stream":true,"stream_options":{"include_usage":true}}`)
	id := resp.Header.Get(streamIDHeader)
	first := ssetest.Read(t, bufio.NewReader(resp.Body), 0) // ends without [DONE]: the stream was cut short
	if len(first) == 0 || first[len(first)-1].Data == "[DONE]" {
		t.Fatalf("first connection got %v", first)
	}
	again := resumeChat(t, rig, "", id, first[len(first)-1].ID, true)
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	text, _, finish, usage := choicesOfEvents(t, append(first, rest...))
	for i := range 2 {
		if text[i] != "abc" || finish[i] != "length" {
			t.Errorf("choice %d: %q (%s), want \"abc\" (length)", i, text[i], finish[i])
		}
	}
	if usage == nil || usage.CompletionTokens != 6 {
		t.Errorf("usage %+v, want 6 completion tokens", usage)
	}
	if n := len(rig.eng.Submits()); n != 2 {
		t.Errorf("%d submits, want the 2 choices' only", n)
	}
}

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestNoReplacementCharacter streams Japanese and emoji (ZWJ sequences
// included) from the real model: every chunk is valid UTF-8 on its own and
// no U+FFFD reaches the client, even when generation stops mid-character.
func TestNoReplacementCharacter(t *testing.T) {
	r := getRig(t)
	tests := []struct {
		name, prompt string
		maxTokens    int
	}{
		{"japanese", "Translate to Japanese: Good morning, how are you?", 24},
		{"emoji with ZWJ", "Repeat exactly: 🎉👩‍💻 こんにちは世界", 30},
		{"emoji list", "Write three emojis that describe happiness.", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":%s}],"max_tokens":%d,"temperature":0,"stream":true}`, jsonString(tt.prompt), tt.maxTokens)
			s := decode(t, ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/chat/completions", body).Body), 0))
			nonASCII := false
			for _, p := range s.pieces {
				if !utf8.ValidString(p) || strings.ContainsRune(p, utf8.RuneError) {
					t.Errorf("chunk %q is not clean UTF-8", p)
				}
				nonASCII = nonASCII || strings.ContainsFunc(p, func(r rune) bool { return r > 0x7f })
			}
			if !nonASCII {
				t.Errorf("the model answered %q: no multi-byte text to check", s.text)
			}
			t.Logf("%s: %q (%s)", tt.name, s.text, s.finish)
		})
	}
}

const storyPrompt = `{"prompt":"Once upon a time, in a small village by the sea,","max_tokens":32,"temperature":0%s}`

// TestStopStringSpanningThreeTokens picks, from the model's own greedy
// output, a stop string that starts inside one token and ends inside the
// token two later; with it the output must end right before it, in the
// streamed and the non-streamed response alike, and never contain it.
func TestStopStringSpanningThreeTokens(t *testing.T) {
	r := getRig(t)
	full, _ := r.complete(t, fmt.Sprintf(storyPrompt, ""))
	ids := r.model.Tokenizer.Encode(full, false)
	if r.model.Tokenizer.Decode(ids, false) != full {
		t.Fatalf("re-encoding %q does not round-trip", full)
	}
	stop := ""
	var pieces []string
	for _, id := range ids {
		pieces = append(pieces, r.model.Tokenizer.Decode([]int32{id}, false))
	}
	for k := 0; k+2 < len(pieces); k++ {
		a, b, c := pieces[k], pieces[k+1], pieces[k+2]
		if len(a) >= 2 && len(c) >= 2 && b != "" && isASCII(a+b+c) {
			stop = a[len(a)-1:] + b + c[:1]
			if strings.Index(full, stop) == len(strings.Join(pieces[:k+1], ""))-1 {
				break // its first occurrence is the one that spans the three tokens
			}
			stop = ""
		}
	}
	if stop == "" {
		t.Fatalf("no stop string spanning three tokens in %q", full)
	}
	want := full[:strings.Index(full, stop)]
	stopJSON := `,"stop":[` + jsonString(stop) + `]`
	before := r.stats().Aborted

	got, finish := r.complete(t, fmt.Sprintf(storyPrompt, stopJSON))
	if got != want || finish != "stop" {
		t.Errorf("stop %q: non-streamed %q (%s), want %q", stop, got, finish, want)
	}
	s := decode(t, ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/completions", fmt.Sprintf(storyPrompt, stopJSON+`,"stream":true`)).Body), 0))
	if s.text != want || s.finish != "stop" || strings.Contains(s.text, stop) {
		t.Errorf("stop %q: streamed %q (%s), want %q", stop, s.text, s.finish, want)
	}
	// Each match aborted its sequence in the engine rather than letting it run to max_tokens.
	if st := r.waitIdle(t, 5*time.Second); st.Aborted-before != 2 {
		t.Errorf("%d aborts for two stop-string matches", st.Aborted-before)
	}
}

// TestPartialStopFlushedAtEnd: text held back because it could begin a stop
// string is sent when generation ends without the stop string completing.
func TestPartialStopFlushedAtEnd(t *testing.T) {
	r := getRig(t)
	full, finish := r.complete(t, fmt.Sprintf(storyPrompt, ""))
	if finish != "length" || len(full) < 3 {
		t.Fatalf("want a length-limited output, got %q (%s)", full, finish)
	}
	tail := full[len(full)-3:]
	stopJSON := `,"stop":[` + jsonString(tail+"\u0007never") + `],"stream":true`
	s := decode(t, ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/completions", fmt.Sprintf(storyPrompt, stopJSON)).Body), 0))
	if s.text != full || s.finish != "length" {
		t.Errorf("got %q (%s), want %q", s.text, s.finish, full)
	}
}

// TestDisconnectFreesKVBlocks kills the client mid-stream and watches the
// engine's own figures: the sequence leaves and its KV blocks are free.
func TestDisconnectFreesKVBlocks(t *testing.T) {
	r := getRig(t)
	before := r.waitIdle(t, 5*time.Second)
	resp := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Write a long essay about the history of the sea."}],"max_tokens":400,"temperature":0,"stream":true}`)
	if s := decode(t, ssetest.Read(t, bufio.NewReader(resp.Body), 4)); len(s.pieces) != 3 {
		t.Fatalf("want 3 pieces of text mid-stream, got %q (%s)", s.pieces, s.finish)
	}
	if s := r.stats(); s.Running != 1 || s.KV.Used == 0 {
		t.Fatalf("mid-stream: running %d, KV %+v", s.Running, s.KV)
	}
	resp.Body.Close() // the client is gone
	after := r.waitIdle(t, 2*time.Second)
	if after.Aborted != before.Aborted+1 || after.Reclaims != before.Reclaims+1 {
		t.Errorf("aborted %d→%d, reclaims %d→%d", before.Aborted, after.Aborted, before.Reclaims, after.Reclaims)
	}
	if after.GenTokens-before.GenTokens >= 400 {
		t.Errorf("the sequence generated %d tokens: it ran to the end", after.GenTokens-before.GenTokens)
	}
	t.Logf("cancel → blocks free: mean %v, worst %v over %d aborts so far",
		after.ReclaimTotal/time.Duration(after.Reclaims), after.ReclaimMax, after.Reclaims)
}

// TestKeepAliveWhileQueued: with the one sequence slot busy, a second
// stream waits in the queue and receives keep-alive comments; once the busy
// client leaves, the queued stream gets its tokens.
func TestKeepAliveWhileQueued(t *testing.T) {
	r := getRig(t)
	r.waitIdle(t, 5*time.Second)
	busy := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Write a long essay about the history of the sea."}],"max_tokens":300,"temperature":0,"stream":true}`)
	ssetest.Read(t, bufio.NewReader(busy.Body), 2) // role + a token: it is running
	queued := r.post(t, "/v1/completions", `{"prompt":"Hello","max_tokens":4,"stream":true}`)
	br := bufio.NewReader(queued.Body)
	for seen := 0; seen < 2; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("queued stream: %v", err)
		}
		switch {
		case line == ": keep-alive\n":
			seen++
		case strings.HasPrefix(line, "data: "):
			t.Fatalf("the queued stream got %q before any keep-alive", line)
		}
	}
	if st := r.stats(); st.Running != 1 || st.Waiting != 1 {
		t.Errorf("while keep-alives flow: running %d waiting %d, want 1 and 1", st.Running, st.Waiting)
	}
	busy.Body.Close() // frees the slot
	if s := decode(t, ssetest.Read(t, br, 0)); s.text == "" || s.finish == "" {
		t.Errorf("the queued stream, once admitted: %+v", s)
	}
}

// TestResumeEqualsUninterrupted cuts a stream, reconnects with the response
// id and Last-Event-ID, and gets exactly the missing events: the text equals
// the uninterrupted stream's, greedy and seeded sampling alike (the sampler
// state continues), and the continuation re-used the freed blocks through
// the prefix cache instead of generating from scratch.
func TestResumeEqualsUninterrupted(t *testing.T) {
	r := getRig(t)
	tests := []struct{ name, sampling string }{
		{"greedy", `"temperature":0`},
		{"seeded sampling", `"temperature":0.9,"top_p":0.95,"seed":42`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"Tell me about the ocean."}],"max_tokens":40,"stream":true,` + tt.sampling + `}`
			whole := decode(t, ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/chat/completions", body).Body), 0))

			resp := r.post(t, "/v1/chat/completions", body)
			id := resp.Header.Get("X-Sluice-Stream-Id")
			first := ssetest.Read(t, bufio.NewReader(resp.Body), 8)
			resp.Body.Close()
			idle := r.waitIdle(t, 2*time.Second) // the disconnect freed the blocks at once

			last := first[len(first)-1].ID
			req, _ := http.NewRequestWithContext(t.Context(), "GET", r.url+"/v1/streams/"+id, nil)
			req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
			again, err := http.DefaultClient.Do(req)
			if err != nil || again.StatusCode != 200 {
				t.Fatalf("resume: %v %v", err, again.Status)
			}
			defer again.Body.Close()
			rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
			for i, ev := range rest {
				if ev.ID != last+1+int64(i) {
					t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
				}
			}
			got := decode(t, append(first, rest...))
			if got.text != whole.text || got.finish != whole.finish {
				// Seeded: engine/api.go promises the sampler state continues
				// from Request.Resume (its PRNG must advance over those tokens).
				t.Errorf("resumed %q (%s)\nuninterrupted %q (%s)", got.text, got.finish, whole.text, whole.finish)
			}
			after := r.waitIdle(t, 5*time.Second)
			if after.PrefixHitTokens == idle.PrefixHitTokens {
				t.Errorf("the continuation found nothing in the prefix cache")
			}
			t.Logf("continuation: %d prompt+resume tokens from the prefix cache", after.PrefixHitTokens-idle.PrefixHitTokens)
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

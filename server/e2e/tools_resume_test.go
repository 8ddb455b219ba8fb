package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

func replay(events []ssetest.Event) *strings.Reader {
	var b strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&b, "id: %d\ndata: %s\n\n", ev.ID, ev.Data)
	}
	return strings.NewReader(b.String())
}

// TestToolCallResume cuts a forced tool call's stream in the middle of its
// arguments and resumes it with Last-Event-ID: the events after the cut
// continue the same call (no second call, the id it started with), and
// name and arguments equal an uninterrupted run's, byte for byte. The
// continuation's constraint is recompiled past the tokens already made.
func TestToolCallResume(t *testing.T) {
	r := getRig(t)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"What is the weather in Rome?"}],"tools":%s,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,"max_tokens":100,"temperature":0,"stream":true}`, weatherTools)
	_, whole, wholeFinish := toolStream(t, r.post(t, "/v1/chat/completions", body).Body)

	resp := r.post(t, "/v1/chat/completions", body)
	id := resp.Header.Get("X-Sluice-Stream-Id")
	var first []ssetest.Event
	br := bufio.NewReader(resp.Body)
	for { // read up to the second argument fragment, skipping keep-alives
		ev := ssetest.Read(t, br, 1)
		if len(ev) == 0 {
			t.Fatal("stream ended before the arguments")
		}
		first = append(first, ev...)
		if strings.Count(strings.Join(eventData(first), ""), `"arguments":"`) >= 3 {
			break
		}
	}
	resp.Body.Close()
	r.waitIdle(t, 2*time.Second)

	last := first[len(first)-1].ID
	req, _ := http.NewRequestWithContext(t.Context(), "GET", r.url+"/v1/streams/"+id, nil)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	again, err := http.DefaultClient.Do(req)
	if err != nil || again.StatusCode != 200 {
		t.Fatalf("resume: %v %v", err, again.Status)
	}
	defer again.Body.Close()
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	content, got, finish := toolStream(t, replay(append(first, rest...)))
	if len(got) != 1 || len(whole) != 1 || got[0].name != whole[0].name || got[0].args != whole[0].args ||
		finish != wholeFinish || finish != "tool_calls" || strings.TrimSpace(content) != "" {
		t.Fatalf("resumed %+v (%s, content %q), uninterrupted %+v (%s)", got, finish, content, whole, wholeFinish)
	}
	t.Logf("cut after event %d; %s(%s)", last, got[0].name, got[0].args)
	r.waitIdle(t, 5*time.Second)
}

func eventData(evs []ssetest.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Data
	}
	return out
}

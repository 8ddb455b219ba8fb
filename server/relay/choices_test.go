package relay_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The relay re-frames one upstream choice, so several choices (n > 1, a
// completions list of prompts) are refused before reaching the upstream,
// never answered with one choice; n = 1 and a one-prompt list pass.
func TestRelayRefusesChoices(t *testing.T) {
	up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sseStart(w)
		finish(w, "stop")
	})
	rig := newRelay(t, up, fast)
	for _, tc := range []struct {
		path, body, param string
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2}`, "n"},
		{"/v1/completions", `{"model":"m","prompt":["a","b"]}`, "prompt"},
		{"/v1/completions", `{"model":"m","prompt":["a"],"n":1,"stream":true}`, ""},
	} {
		res, err := http.Post(rig.url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case tc.param == "" && res.StatusCode != 200:
			t.Errorf("%s: %d %s", tc.body, res.StatusCode, body)
		case tc.param != "" && (res.StatusCode != 400 || !strings.Contains(string(body), `"param":"`+tc.param+`"`)):
			t.Errorf("%s: %d %s, want a 400 naming %s", tc.body, res.StatusCode, body, tc.param)
		}
	}
	if got := up.requests.Load(); got != 1 {
		t.Errorf("%d upstream requests, want the one-choice request's only", got)
	}
}

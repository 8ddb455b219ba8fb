package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
)

// TestRelayTenants: in relay mode with two keys, the responses the relay
// stores are their key's, as a local server's are: B's get, delete and
// previous_response_id of A's response are an unknown id's (the upstream
// never sees B's continuation); A's all work.
func TestRelayTenants(t *testing.T) {
	leakCheck(t)
	up := newFake(t, answerResponses("Paris is the capital."))
	keys, err := auth.New([]string{"sk-a", "sk-b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	rig := newRelay(t, up, fast, func(c *server.Config) { c.Keys = keys })
	as := func(key, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, rig.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := as("sk-a", "POST", "/v1/responses", `{"model":"m","input":"Capital of France?"}`)
	<-up.bodies
	id, _, _ := strings.Cut(strings.TrimPrefix(body, `{"id":"`), `"`)
	if status != http.StatusOK || !strings.HasPrefix(id, "resp_") {
		t.Fatalf("create as A: %d %s", status, body)
	}
	never := id[:len(id)-4] + "0000"
	cont := `{"model":"m","input":"And Spain?","previous_response_id":%q}`
	for _, c := range []struct{ name, method, path, body string }{
		{"get", "GET", "/v1/responses/%s", ""},
		{"continue", "POST", "/v1/responses", cont},
		{"delete", "DELETE", "/v1/responses/%s", ""},
	} {
		fill := func(s, id string) string {
			if strings.Contains(s, "%") {
				return fmt.Sprintf(s, id)
			}
			return s
		}
		wantStatus, wantBody := as("sk-b", c.method, fill(c.path, never), fill(c.body, never))
		status, body := as("sk-b", c.method, fill(c.path, id), fill(c.body, id))
		if status != wantStatus || strings.ReplaceAll(body, id, never) != wantBody || status/100 != 4 {
			t.Errorf("%s as B: %d %s\nan unknown id gets %d %s", c.name, status, body, wantStatus, wantBody)
		}
		if status == http.StatusOK && c.method == "POST" {
			<-up.bodies
		}
	}
	if status, body := as("sk-a", "GET", "/v1/responses/"+id, ""); status != http.StatusOK {
		t.Errorf("get as A: %d %s", status, body)
	}
	if status, body := as("sk-a", "POST", "/v1/responses", fmt.Sprintf(cont, id)); status != http.StatusOK {
		t.Errorf("continue as A: %d %s", status, body)
	} else if sent := <-up.bodies; fmt.Sprint(sent["input"]) == "And Spain?" {
		t.Errorf("A's continuation went upstream without the conversation: %v", sent)
	}
	if status, body := as("sk-a", "DELETE", "/v1/responses/"+id, ""); status != http.StatusOK {
		t.Errorf("delete as A: %d %s", status, body)
	}
}

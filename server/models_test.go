package server

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestServedNames: with --served-model-name, /v1/models lists those names
// only and a request without model reports the first; the file's id still
// selects the model. Without one, the id is the name.
func TestServedNames(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, func(c *Config) { c.Aliases = []string{"smol", "smol-2"} })
	resp, err := http.Get(r.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []struct{ ID string } }
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Data) != 2 || list.Data[0].ID != "smol" || list.Data[1].ID != "smol-2" {
		t.Errorf("/v1/models: %+v", list)
	}
	for body, want := range map[string]string{
		`{"prompt":"x"}`:                             "smol",
		`{"prompt":"x","model":"smol-2"}`:            "smol-2",
		`{"prompt":"x","model":"` + testModel + `"}`: testModel,
	} {
		var out struct{ Model string }
		resp := r.post(t, "/v1/completions", body)
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 || out.Model != want {
			t.Errorf("%s: %d model %q, want %q", body, resp.StatusCode, out.Model, want)
		}
	}
}

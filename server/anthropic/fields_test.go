package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/stream"
)

// messagesSamples give each Messages field a value that must change the
// parsed request, or, as "!" + value, one that must be refused naming it.
var messagesSamples = map[string]struct{ value, needs string }{
	"model":                {value: `"other"`},
	"messages":             {value: `[{"role":"user","content":"bye"}]`},
	"system":               {value: `"be brief"`},
	"max_tokens":           {value: `3000`},
	"stop_sequences":       {value: `["x"]`},
	"temperature":          {value: `0.5`},
	"top_p":                {value: `0.5`},
	"top_k":                {value: `5`},
	"stream":               {value: `true`},
	"metadata":             {value: `{"user_id":"u"}`},
	"thinking":             {value: `{"type":"enabled","budget_tokens":1024}`},
	"user_profile_id":      {value: `"p"`},
	"output_config":        {value: `{"effort":"low"}`},
	"tools":                {value: `[{"name":"f","input_schema":{"type":"object"}}]`},
	"tool_choice":          {value: `{"type":"any"}`, needs: `"tools":[{"name":"f","input_schema":{"type":"object"}}]`},
	"context_management":   {value: `{"edits":[{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":1}}]}`, needs: `"thinking":{"type":"enabled","budget_tokens":1024}`},
	"allow_special_tokens": {value: `true`},
	"container":            {value: `!"c"`},
	"mcp_servers":          {value: `![{"type":"url","url":"http://x","name":"x"}]`},
	"diagnostics":          {value: `!{"a":1}`},
	"inference_geo":        {value: `!"us"`},
	"output_format":        {value: `!{"type":"json_schema","schema":{}}`},
	"workspace_id":         {value: `!"w"`},
}

// TestMessagesFieldsNotDropped walks every top-level field of a Messages
// body (wireRequest by reflection) and proves none is dropped in silence:
// a body with the field parses to a different request than without it,
// or is refused naming it, or the field is one of wirefields.Hints.
func TestMessagesFieldsNotDropped(t *testing.T) {
	for name := range KnownFields() {
		if wirefields.IsHint(wirefields.Messages, name) {
			continue
		}
		s, ok := messagesSamples[name]
		if !ok {
			t.Errorf("%s: no sample value: add one that changes the parsed request, or list the field in wirefields.Hints", name)
			continue
		}
		base := `"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]`
		if s.needs != "" {
			base += "," + s.needs
		}
		without := "{" + base + "}"
		g0, err := parse([]byte(without), false)
		if err != nil {
			t.Fatalf("%s without it: %v", name, err)
		}
		value, wantRefused := strings.CutPrefix(s.value, "!")
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(without), &m)
		m[name] = json.RawMessage(value)
		with, _ := json.Marshal(m)
		g1, err := parse(with, false)
		var pe *stream.ParamError
		switch {
		case wantRefused && (!errors.As(err, &pe) || !strings.HasPrefix(pe.Param, name)):
			t.Errorf("%s=%s: %v, want refused naming it", name, value, err)
		case !wantRefused && err != nil:
			t.Errorf("%s=%s: refused (%v), want honoured", name, value, err)
		case !wantRefused && reflect.DeepEqual(g0, g1):
			t.Errorf("%s=%s: the parsed request is the same as without it: the field is dropped", name, value)
		}
	}
}

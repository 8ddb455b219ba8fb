package anthropic

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/stream"
)

// messagesSamples give each Messages field a value that must change the
// parsed request, or, as "!" + value, one that must be refused naming it.
var messagesSamples = map[string]wirefields.Sample{
	"model":                {Value: `"other"`},
	"messages":             {Value: `[{"role":"user","content":"bye"}]`},
	"system":               {Value: `"be brief"`},
	"max_tokens":           {Value: `3000`},
	"stop_sequences":       {Value: `["x"]`},
	"temperature":          {Value: `0.5`},
	"top_p":                {Value: `0.5`},
	"top_k":                {Value: `5`},
	"stream":               {Value: `true`},
	"metadata":             {Value: `{"user_id":"u"}`},
	"thinking":             {Value: `{"type":"enabled","budget_tokens":1024}`},
	"user_profile_id":      {Value: `"p"`},
	"output_config":        {Value: `{"effort":"low"}`},
	"tools":                {Value: `[{"name":"f","input_schema":{"type":"object"}}]`},
	"tool_choice":          {Value: `{"type":"any"}`, Needs: `"tools":[{"name":"f","input_schema":{"type":"object"}}]`},
	"context_management":   {Value: `{"edits":[{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":1}}]}`, Needs: `"thinking":{"type":"enabled","budget_tokens":1024}`},
	"allow_special_tokens": {Value: `true`},
	"container":            {Value: `!"c"`},
	"mcp_servers":          {Value: `![{"type":"url","url":"http://x","name":"x"}]`},
	"diagnostics":          {Value: `!{"a":1}`},
	"inference_geo":        {Value: `!"us"`},
	"output_format":        {Value: `!{"type":"json_schema","schema":{}}`},
	"workspace_id":         {Value: `!"w"`},
}

// TestMessagesFieldsNotDropped walks every top-level field of a Messages
// body (wireRequest by reflection) and proves none is dropped in silence:
// a body with the field parses to a different request than without it,
// or is refused naming it, or the field is one of wirefields.Hints.
func TestMessagesFieldsNotDropped(t *testing.T) {
	cases, missing := wirefields.Walk(wirefields.Messages, KnownFields(), messagesSamples, `"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]`)
	for _, name := range missing {
		t.Errorf("%s: no sample value: add one that changes the parsed request, or list the field in wirefields.Hints", name)
	}
	for _, c := range cases {
		g0, err := parse(c.Without, false)
		if err != nil {
			t.Fatalf("%s without it: %v", c.Name, err)
		}
		g1, err := parse(c.With, false)
		var pe *stream.ParamError
		switch {
		case c.Refused && (!errors.As(err, &pe) || !strings.HasPrefix(pe.Param, c.Name)):
			t.Errorf("%s=%s: %v, want refused naming it", c.Name, c.Value, err)
		case !c.Refused && err != nil:
			t.Errorf("%s=%s: refused (%v), want honoured", c.Name, c.Value, err)
		case !c.Refused && reflect.DeepEqual(g0, g1):
			t.Errorf("%s=%s: the parsed request is the same as without it: the field is dropped", c.Name, c.Value)
		}
	}
}

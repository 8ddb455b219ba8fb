package stream

import (
	"encoding/json"
	"testing"
)

func forceReq(t *testing.T, msgs []ChatMessage, choice string) *GenRequest {
	t.Helper()
	g := &GenRequest{Chat: true, Messages: msgs}
	tools := `[{"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{"file_path":{"type":"string"}}}}},
		{"type":"function","function":{"name":"Bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]`
	var c json.RawMessage
	if choice != "" {
		c = json.RawMessage(choice)
	}
	if err := g.SetTools(json.RawMessage(tools), c, nil); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestForcedCallApplies(t *testing.T) {
	f, err := ParseForcedCall(`Bash={"command":"echo hi","timeout":5}`)
	if err != nil {
		t.Fatal(err)
	}
	user := []ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "hi"}}
	g := forceReq(t, user, "")
	orig := g.Tools.List[1].Parameters
	if !f.Apply(g) {
		t.Fatal("a first turn offering Bash with tool_choice auto was not forced")
	}
	if g.Tools.Choice != ToolChoiceFunction || g.Tools.Function != "Bash" || !g.Tools.Forced() {
		t.Fatalf("tools after Apply: %+v", g.Tools)
	}
	want := `{"type":"object","properties":{"command":{"const":"echo hi"},"timeout":{"const":5}},"required":["command","timeout"],"additionalProperties":false}`
	if got := string(g.Tools.List[1].Parameters); got != want {
		t.Fatalf("pinned schema\n got %s\nwant %s", got, want)
	}
	if gr := toolGrammar(g.Tools); !json.Valid([]byte(want)) || gr.Data == "" {
		t.Fatalf("grammar %q", gr.Data)
	}
	if string(orig) == want {
		t.Fatal("the schema was pinned in the caller's list")
	}

	if g.Tools.Parallel {
		t.Error("a forced reply may hold several calls")
	}

	after := forceReq(t, append(user,
		ChatMessage{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "Bash", Arguments: `{}`}}},
		ChatMessage{Role: "tool", ToolCallID: "c1", Content: "hi"}), "")
	if !f.Apply(after) || after.Tools.Choice != ToolChoiceNone || string(after.Tools.List[1].Parameters) == want ||
		after.Output.Grammar != &shortAnswer {
		t.Errorf("after a tool turn: %+v", after.Tools)
	}

	cases := map[string]*GenRequest{
		"tool_choice none":     forceReq(t, user, `"none"`),
		"tool_choice required": forceReq(t, user, `"required"`),
		"tool not offered":     {Chat: true, Messages: user},
	}
	for name, g := range cases {
		before := g.Tools
		if f.Apply(g) {
			t.Errorf("%s: forced", name)
		}
		if g.Tools.Choice != before.Choice || g.Tools.Function != before.Function {
			t.Errorf("%s: tools changed to %+v", name, g.Tools)
		}
	}
	var none *ForcedCall
	if none.Apply(forceReq(t, user, "")) {
		t.Error("a nil ForcedCall forced a call")
	}
}

func TestParseForcedCall(t *testing.T) {
	if f, err := ParseForcedCall("Read"); err != nil || f.Name != "Read" || f.Args != nil {
		t.Fatalf("Read: %+v %v", f, err)
	}
	for _, bad := range []string{"", "=", `Bash=[1]`, `Bash=null`, `Bash={`} {
		if _, err := ParseForcedCall(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

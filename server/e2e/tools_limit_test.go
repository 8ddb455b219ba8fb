package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestToolCallsLengthCutLive: with tool_choice "required" (Messages: "any")
// and parallel calls allowed, the default model repeats its call until the
// token limit. Cut at every token from the end of its first call until the
// name of its second is read (its opener "\n<tool_call>\n{\"name\": \"" is
// several tokens), the reply holds no text at all (before the fix the
// held-back "\n<tool_call" went out as content), holds one call, whole and
// equal to the call made when parallel calls are off, and ends with
// finish_reason "length" / stop_reason "max_tokens"; streamed and whole
// replies agree.
func TestToolCallsLengthCutLive(t *testing.T) {
	r := getRig(t)
	const ask = `[{"role":"user","content":"What is the weather in Paris?"}]`
	chat := func(maxTokens int, stream, parallel bool) string {
		return fmt.Sprintf(`{"messages":%s,"tools":%s,"tool_choice":"required","parallel_tool_calls":%t,"max_tokens":%d,"temperature":0,"stream":%t}`,
			ask, weatherTools, parallel, maxTokens, stream)
	}
	type choice struct {
		Message struct {
			Content   *string
			ToolCalls []struct {
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason string `json:"finish_reason"`
	}
	whole := func(body string) (choice, int) {
		t.Helper()
		resp := r.post(t, "/v1/chat/completions", body)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out struct {
			Choices []choice
			Usage   struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%v: %s", err, raw)
		}
		return out.Choices[0], out.Usage.CompletionTokens
	}

	// One call, where the grammar ends the reply after it: its tokens.
	one, used := whole(chat(120, false, false))
	if one.FinishReason != "tool_calls" || len(one.Message.ToolCalls) != 1 {
		t.Fatalf("parallel calls off: %+v", one)
	}
	first := one.Message.ToolCalls[0].Function

	cuts := 0
	for n := used; ; n++ {
		if n > used+30 {
			t.Fatalf("no second call within %d tokens after the first", n-used)
		}
		content, got, finish := toolStream(t, r.post(t, "/v1/chat/completions", chat(n, true, true)).Body)
		if len(got) == 2 && content == "" && finish == "length" {
			t.Logf("%s(%s) in %d tokens; the second call's name read at %d, after %d cuts with no text", first.Name, first.Arguments, used, n, cuts)
			break
		}
		cuts++
		if content != "" || finish != "length" || len(got) != 1 || got[0].name != first.Name || got[0].args != first.Arguments {
			t.Fatalf("chat cut at %d tokens, streamed: content %q, finish %q, calls %+v; want no content, length, %s(%s)",
				n, content, finish, got, first.Name, first.Arguments)
		}
		c, _ := whole(chat(n, false, true))
		if c.Message.Content != nil && *c.Message.Content != "" || c.FinishReason != "length" || len(c.Message.ToolCalls) != 1 ||
			c.Message.ToolCalls[0].Function != first {
			t.Fatalf("chat cut at %d tokens, whole: %+v", n, c)
		}

		texts, uses, stop := messagesCut(t, r, n, true)
		wtexts, wuses, wstop := messagesCut(t, r, n, false)
		if texts != 0 || wtexts != 0 || stop != "max_tokens" || wstop != "max_tokens" || len(uses) != 1 ||
			len(wuses) != 1 || canonJSON(uses[0]) != canonJSON(wuses[0]) {
			t.Fatalf("messages cut at %d tokens: streamed %d text blocks, tool_use %q, %s; whole %d text blocks, %q, %s",
				n, texts, uses, stop, wtexts, wuses, wstop)
		}
		if canonJSON(uses[0]) == "" || canonJSON(uses[0]) != canonJSON(first.Arguments) {
			t.Fatalf("messages cut at %d tokens: input %s, chat's arguments %s", n, uses[0], first.Arguments)
		}
	}
	if cuts < 3 {
		t.Fatalf("only %d cuts between the first call and the second's name", cuts)
	}
	r.waitIdle(t, 5*time.Second)
}

// messagesCut asks /v1/messages for the same forced call cut at maxTokens
// and returns its text block count, each tool_use's input JSON (streamed:
// the joined input_json_delta fragments) and the stop_reason.
func messagesCut(t *testing.T, r *rig, maxTokens int, stream bool) (texts int, inputs []string, stop string) {
	t.Helper()
	body := fmt.Sprintf(`{"max_tokens":%d,"temperature":0,"stream":%t,"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tool_choice":{"type":"any"},"tools":%s}`,
		maxTokens, stream, messagesTools(t))
	resp := r.post(t, "/v1/messages", body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("messages: %d %s", resp.StatusCode, raw)
	}
	type block struct {
		Type  string
		Text  string
		Input json.RawMessage
	}
	if !stream {
		var m struct {
			Content    []block
			StopReason string `json:"stop_reason"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				texts++
			case "tool_use":
				inputs = append(inputs, string(b.Input))
			}
		}
		return texts, inputs, m.StopReason
	}
	for _, ev := range ssetest.ReadNamed(t, bufio.NewReader(resp.Body), 0) {
		var e struct {
			Type         string
			ContentBlock block `json:"content_block"`
			Delta        struct {
				Type        string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatalf("%s: %v", ev.Data, err)
		}
		switch {
		case e.Type == "content_block_start" && e.ContentBlock.Type == "text":
			texts++
		case e.Type == "content_block_start" && e.ContentBlock.Type == "tool_use":
			inputs = append(inputs, "")
		case e.Type == "content_block_delta" && e.Delta.Type == "input_json_delta":
			inputs[len(inputs)-1] += e.Delta.PartialJSON
		case e.Type == "content_block_delta":
			t.Fatalf("a forced reply streams %s", ev.Data)
		case e.Type == "message_delta":
			stop = e.Delta.StopReason
		case e.Type == "error":
			t.Fatalf("messages stream: %s", ev.Data)
		}
	}
	return texts, inputs, stop
}

// messagesTools is weatherTools in the Messages API's shape.
func messagesTools(t *testing.T) string {
	t.Helper()
	var chat []struct {
		Function struct {
			Name, Description string
			Parameters        json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(weatherTools), &chat); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, c := range chat {
		out = append(out, map[string]any{"name": c.Function.Name, "description": c.Function.Description, "input_schema": c.Function.Parameters})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// canonJSON is s re-encoded, to compare JSON texts by value ("" when s is
// not JSON).
func canonJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

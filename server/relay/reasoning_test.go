package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Upstream streams of reasoning in the shapes Sluice itself does not send
// (the relay's reading of Sluice's is server's TestRelayReasoningAllAPIs).

// vllmChat sends the reasoning under "reasoning" only (vLLM's newer name),
// one chunk with both reasoning and content, and the reasoning tokens.
func vllmChat(w http.ResponseWriter, _ *http.Request, _ *fakeUpstream) {
	sseHeader(w)
	for _, d := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Hmm, "}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"fine.","content":"Yes"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12,"completion_tokens_details":{"reasoning_tokens":3}}}`,
		`[DONE]`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", d)
		flush(w)
	}
}

// anthropicOmitted is Anthropic's stream for thinking.display omitted: a
// thinking block with no text, only its signature.
func anthropicOmitted(w http.ResponseWriter, _ *http.Request, _ *fakeUpstream) {
	sseHeader(w)
	named(w, "message_start", `{"type":"message_start","message":{"usage":{"input_tokens":7}}}`)
	named(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
	named(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBupstreamSig"}}`)
	named(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
	named(w, "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
	named(w, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Yes."}}`)
	named(w, "content_block_stop", `{"type":"content_block_stop","index":1}`)
	named(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`)
	named(w, "message_stop", `{"type":"message_stop"}`)
}

// anthropicInterleaved is Anthropic's interleaved thinking: a thinking
// block before each step, each with its own signature, and a redacted one.
func anthropicInterleaved(w http.ResponseWriter, _ *http.Request, _ *fakeUpstream) {
	sseHeader(w)
	named(w, "message_start", `{"type":"message_start","message":{"usage":{"input_tokens":7}}}`)
	for i, b := range []struct{ typ, start, delta string }{
		{"thinking", `{"type":"thinking","thinking":"","signature":""}`, `{"type":"thinking_delta","thinking":"First."}`},
		{"thinking", "", `{"type":"signature_delta","signature":"sigOne"}`},
		{"tool_use", `{"type":"tool_use","id":"toolu_1","name":"look","input":{}}`, `{"type":"input_json_delta","partial_json":"{}"}`},
		{"redacted_thinking", `{"type":"redacted_thinking","data":"EmwKAhgBupstreamData"}`, ""},
		{"thinking", `{"type":"thinking","thinking":"","signature":""}`, `{"type":"thinking_delta","thinking":"Then."}`},
		{"thinking", "", `{"type":"signature_delta","signature":"sigTwo"}`},
		{"text", `{"type":"text","text":""}`, `{"type":"text_delta","text":"Done."}`},
	} {
		n := map[int]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 3, 6: 4}[i]
		if b.start != "" {
			named(w, "content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, n, b.start))
		}
		if b.delta != "" {
			named(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, n, b.delta))
		}
	}
	named(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`)
	named(w, "message_stop", `{"type":"message_stop"}`)
}

// openaiSummary is OpenAI's Responses stream of a reasoning model: the
// reasoning only as its summary, and its encrypted_content.
func openaiSummary(w http.ResponseWriter, _ *http.Request, _ *fakeUpstream) {
	sseHeader(w)
	named(w, "response.created", `{"type":"response.created","response":{}}`)
	named(w, "response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_up"}}`)
	named(w, "response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"Think"}`)
	named(w, "response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"ing."}`)
	named(w, "response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_up","encrypted_content":"gAAAAupstreamSeal"}}`)
	named(w, "response.output_item.added", `{"type":"response.output_item.added","output_index":1,"item":{"type":"message"}}`)
	named(w, "response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"delta":"Yes."}`)
	named(w, "response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":5,"output_tokens_details":{"reasoning_tokens":3}}}}`)
}

// relayed is what a client read: a whole body, or a stream's data lines in
// order.
func relayed(t *testing.T, url, path, body string) (whole map[string]any, evs []map[string]any) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
	}
	if !strings.Contains(body, `"stream":true`) {
		if err := json.Unmarshal(raw, &whole); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return whole, nil
	}
	for _, line := range strings.Split(string(raw), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		evs = append(evs, ev)
	}
	return nil, evs
}

// at walks v by keys and indexes ("choices.0.message.content").
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// TestRelayReasoningShapes: reasoning in the upstream shapes other servers
// send reaches the client: vLLM's chat "reasoning" (before the content of
// the same chunk) with its reasoning tokens; Anthropic's thinking block
// with display omitted, its signature passed on unchanged; OpenAI's
// Responses reasoning given only as a summary, its encrypted_content
// passed on unchanged, with its reasoning tokens. Before, chat and
// Responses dropped the reasoning and Messages failed on the
// signature_delta.
func TestRelayReasoningShapes(t *testing.T) {
	t.Run("chat reasoning", func(t *testing.T) {
		rig := newRelay(t, newFake(t, vllmChat), fast)
		body := `{"model":"m","messages":[{"role":"user","content":"Ok?"}]`
		whole, _ := relayed(t, rig.url, "/v1/chat/completions", body+`}`)
		m := at(whole, "choices.0.message")
		if at(m, "reasoning_content") != "Hmm, fine." || at(m, "reasoning") != "Hmm, fine." || at(m, "content") != "Yes." ||
			at(whole, "usage.completion_tokens_details.reasoning_tokens") != 3.0 {
			t.Errorf("whole: %v", whole)
		}
		_, evs := relayed(t, rig.url, "/v1/chat/completions", body+`,"stream":true,"stream_options":{"include_usage":true}}`)
		var order, reasoning, content string
		var tokens any
		for _, ev := range evs {
			d := at(ev, "choices.0.delta")
			if r, _ := at(d, "reasoning_content").(string); r != "" {
				order, reasoning = order+"r", reasoning+r
				if at(d, "reasoning") != r {
					t.Errorf("delta %v: reasoning and reasoning_content differ", d)
				}
			}
			if c, _ := at(d, "content").(string); c != "" {
				order, content = order+"c", content+c
			}
			if u := at(ev, "usage.completion_tokens_details.reasoning_tokens"); u != nil {
				tokens = u
			}
		}
		if reasoning != "Hmm, fine." || content != "Yes." || strings.Contains(strings.TrimLeft(order, "r"), "r") || tokens != 3.0 {
			t.Errorf("stream: reasoning %q, content %q, order %s, reasoning tokens %v", reasoning, content, order, tokens)
		}
		// Reasoning is output: each of the 3 chunks times once (TTFT, then
		// 2 ITLs), in each of the 2 requests.
		host := mustHost(t, rig.up.URL)
		fams := scrape(t, rig)
		if ttft, itl := fams.Value(t, "sluice_relay_time_to_first_token_seconds", "upstream", host),
			fams.Value(t, "sluice_relay_inter_token_latency_seconds", "upstream", host); ttft != 2 || itl != 4 {
			t.Errorf("%v TTFT and %v ITL observations, want 2 and 4", ttft, itl)
		}
	})
	t.Run("messages omitted thinking", func(t *testing.T) {
		rig := newRelay(t, newFake(t, anthropicOmitted), fast)
		body := `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"},"messages":[{"role":"user","content":"Ok?"}]`
		whole, _ := relayed(t, rig.url, "/v1/messages", body+`}`)
		if at(whole, "content.0.type") != "thinking" || at(whole, "content.0.thinking") != "" || at(whole, "content.0.signature") != "EqQBupstreamSig" ||
			at(whole, "content.1.text") != "Yes." {
			t.Errorf("whole: %v", whole)
		}
		_, evs := relayed(t, rig.url, "/v1/messages", body+`,"stream":true}`)
		var got []string
		for _, ev := range evs {
			switch at(ev, "type") {
			case "content_block_start":
				got = append(got, fmt.Sprintf("start %v %v", at(ev, "index"), at(ev, "content_block.type")))
			case "content_block_delta":
				got = append(got, fmt.Sprintf("%v %v%v", at(ev, "index"), at(ev, "delta.signature"), at(ev, "delta.text")))
			}
		}
		want := "start 0 thinking|0 EqQBupstreamSig<nil>|start 1 text|1 <nil>Yes."
		if strings.Join(got, "|") != want {
			t.Errorf("stream: %s, want %s", strings.Join(got, "|"), want)
		}
	})
	t.Run("messages interleaved thinking", func(t *testing.T) {
		// Each thinking block keeps its place and its own signature, and
		// the redacted one its data, whole and streamed.
		rig := newRelay(t, newFake(t, anthropicInterleaved), fast)
		body := `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
			`"tools":[{"name":"look","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Ok?"}]`
		show := func(b any) string {
			return fmt.Sprintf("%v %v%v%v%v", at(b, "type"), at(b, "thinking"), at(b, "signature"), at(b, "data"), at(b, "text"))
		}
		want := "thinking First.sigOne<nil><nil>|tool_use <nil><nil><nil><nil>|redacted_thinking <nil><nil>EmwKAhgBupstreamData<nil>|" +
			"thinking Then.sigTwo<nil><nil>|text <nil><nil><nil>Done."
		whole, _ := relayed(t, rig.url, "/v1/messages", body+`}`)
		var got []string
		for i := 0; at(whole, fmt.Sprintf("content.%d", i)) != nil; i++ {
			got = append(got, show(at(whole, fmt.Sprintf("content.%d", i))))
		}
		if strings.Join(got, "|") != want {
			t.Errorf("whole: %s, want %s", strings.Join(got, "|"), want)
		}
		// Streamed: each block's start, its deltas' text and signature
		// added up.
		_, evs := relayed(t, rig.url, "/v1/messages", body+`,"stream":true}`)
		var blocks []map[string]any
		for _, ev := range evs {
			switch at(ev, "type") {
			case "content_block_start":
				blocks = append(blocks, at(ev, "content_block").(map[string]any))
			case "content_block_delta":
				b, d := blocks[len(blocks)-1], at(ev, "delta").(map[string]any)
				for k, v := range d {
					if s, ok := v.(string); ok && k != "type" && k != "partial_json" {
						prev, _ := b[k].(string)
						b[k] = prev + s
					}
				}
			}
		}
		got = got[:0]
		for _, b := range blocks {
			got = append(got, show(b))
		}
		if strings.Join(got, "|") != want {
			t.Errorf("stream: %s, want %s", strings.Join(got, "|"), want)
		}
	})
	t.Run("responses encrypted only", func(t *testing.T) {
		// A reasoning item with no text shown, only its encrypted_content:
		// its summary part is announced before it is done, as the SDKs
		// expect of every part.
		rig := newRelay(t, newFake(t, func(w http.ResponseWriter, _ *http.Request, _ *fakeUpstream) {
			sseHeader(w)
			named(w, "response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_up"}}`)
			named(w, "response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","encrypted_content":"gAAAAonly"}}`)
			named(w, "response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"delta":"Yes."}`)
			named(w, "response.completed", `{"type":"response.completed","response":{}}`)
		}), fast)
		_, evs := relayed(t, rig.url, "/v1/responses", `{"model":"m","input":"Ok?","reasoning":{"summary":"auto"},"include":["reasoning.encrypted_content"],"stream":true}`)
		var got []string
		for _, ev := range evs {
			if typ := at(ev, "type").(string); strings.Contains(typ, "summary_part") || at(ev, "item.type") == "reasoning" {
				got = append(got, fmt.Sprintf("%s %v", typ, at(ev, "item.encrypted_content")))
			}
		}
		want := "response.output_item.added <nil>|response.reasoning_summary_part.added <nil>|" +
			"response.reasoning_summary_part.done <nil>|response.output_item.done gAAAAonly"
		if strings.Join(got, "|") != want {
			t.Errorf("stream: %s, want %s", strings.Join(got, "|"), want)
		}
	})
	t.Run("responses summary", func(t *testing.T) {
		rig := newRelay(t, newFake(t, openaiSummary), fast)
		body := `{"model":"m","input":"Ok?","reasoning":{"summary":"auto"},"include":["reasoning.encrypted_content"]`
		whole, _ := relayed(t, rig.url, "/v1/responses", body+`}`)
		if at(whole, "output.0.type") != "reasoning" || at(whole, "output.0.summary.0.text") != "Thinking." ||
			at(whole, "output.0.encrypted_content") != "gAAAAupstreamSeal" || at(whole, "output.1.content.0.text") != "Yes." ||
			at(whole, "usage.output_tokens_details.reasoning_tokens") != 3.0 {
			t.Errorf("whole: %v", whole)
		}
		_, evs := relayed(t, rig.url, "/v1/responses", body+`,"stream":true}`)
		var summary, seal string
		var tokens any
		for _, ev := range evs {
			switch at(ev, "type") {
			case "response.reasoning_summary_text.delta":
				summary += at(ev, "delta").(string)
			case "response.output_item.done":
				if at(ev, "item.type") == "reasoning" {
					seal, _ = at(ev, "item.encrypted_content").(string)
				}
			case "response.completed":
				tokens = at(ev, "response.usage.output_tokens_details.reasoning_tokens")
			}
		}
		if summary != "Thinking." || seal != "gAAAAupstreamSeal" || tokens != 3.0 {
			t.Errorf("stream: summary %q, encrypted_content %q, reasoning tokens %v", summary, seal, tokens)
		}
	})
}

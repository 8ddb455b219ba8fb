package main

import (
	"strings"
	"testing"
)

const goodChat = `id: 1
data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

: keep-alive

id: 2
data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}

id: 3
data: {"choices":[{"index":0,"delta":{"content":"lo é"},"finish_reason":null}]}

id: 4
data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}

id: 5
data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}

id: 6
data: [DONE]

`

const goodCompletionError = `id: 1
data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}

id: 2
data: {"error":{"message":"step failed","type":"server_error","code":"server_error"}}

id: 3
data: [DONE]

`

const goodResponses = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"status":"in_progress"}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"delta":"Hi"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":2,"delta":" there"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":3,"text":"Hi there"}

event: response.completed
data: {"type":"response.completed","sequence_number":4,"response":{"status":"completed","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}}

`

const goodMessages = `event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":0}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Yes"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":5,"output_tokens":1}}

event: message_stop
data: {"type":"message_stop"}

`

// TestCheckAcceptsWellFormed: one stream of each shape, an in-band error
// included, passes and yields its text.
func TestCheckAcceptsWellFormed(t *testing.T) {
	for _, tc := range []struct {
		proto  Proto
		raw    string
		want   Expect
		text   string
		finish string
		code   string
	}{
		{ProtoOpenAI, goodChat, Expect{MaxTokens: 3, Stops: []string{"xyz"}}, "Hello é", "length", ""},
		// two text events from one token: its text up to a possible stop
		// string's start, and that start, held back, at the end
		{ProtoOpenAI, strings.Replace(goodChat, `"completion_tokens":3,"total_tokens":12`, `"completion_tokens":1,"total_tokens":10`, 1), Expect{MaxTokens: 1}, "Hello é", "length", ""},
		{ProtoOpenAI, goodCompletionError, Expect{MaxTokens: 8}, "a", "", "server_error"},
		{ProtoResponses, goodResponses, Expect{MaxTokens: 8}, "Hi there", "stop", ""},
		{ProtoMessages, goodMessages, Expect{MaxTokens: 8, Stops: []string{"No"}}, "Yes", "end_turn", ""},
	} {
		c, err := Check(tc.proto, []byte(tc.raw), tc.want)
		if err != nil || c.Text != tc.text || c.Finish != tc.finish || c.ErrCode != tc.code {
			t.Errorf("%s: %+v, %v; want text %q finish %q code %q", tc.proto, c, err, tc.text, tc.finish, tc.code)
		}
	}
}

// TestCheckRefusesMalformed: each defect the soak looks for is caught.
func TestCheckRefusesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto Proto
		raw   string
		want  Expect
	}{
		{"ids not increasing", ProtoOpenAI, strings.Replace(goodChat, "id: 3", "id: 2", 1), Expect{MaxTokens: 3}},
		{"no [DONE]", ProtoOpenAI, strings.Replace(goodChat, "id: 6\ndata: [DONE]\n\n", "", 1), Expect{MaxTokens: 3}},
		{"[DONE] not last", ProtoOpenAI, goodChat + "id: 7\ndata: {\"choices\":[]}\n\n", Expect{MaxTokens: 3}},
		{"torn tail", ProtoOpenAI, strings.TrimSuffix(goodChat, "\n\n"), Expect{MaxTokens: 3}},
		{"invalid UTF-8", ProtoOpenAI, strings.Replace(goodChat, "é", "\xc3", 1), Expect{MaxTokens: 3}},
		{"stop string leaked", ProtoOpenAI, goodChat, Expect{MaxTokens: 3, Stops: []string{"lo"}}},
		{"length finish short of max_tokens", ProtoOpenAI, goodChat, Expect{MaxTokens: 4}},
		{"more tokens than max_tokens", ProtoOpenAI, goodChat, Expect{MaxTokens: 2}},
		{"usage total wrong", ProtoOpenAI, strings.Replace(goodChat, `"total_tokens":12`, `"total_tokens":13`, 1), Expect{MaxTokens: 3}},
		{"content after the finish", ProtoOpenAI, strings.Replace(goodChat, "id: 5\n", "id: 5\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\nid: 55\n", 1), Expect{MaxTokens: 3}},
		{"no finish before [DONE]", ProtoOpenAI, "id: 1\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\nid: 2\ndata: [DONE]\n\n", Expect{}},
		{"more text events than tokens and a held-back tail", ProtoOpenAI, "id: 1\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" +
			"id: 2\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\nid: 3\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n" +
			"id: 4\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
			"id: 5\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\nid: 6\ndata: [DONE]\n\n", Expect{}},
		{"not JSON", ProtoOpenAI, strings.Replace(goodChat, `{"choices":[{"index":0,"delta":{"content":"Hel"}`, `{"choices":[{"index":0,"delta":{"content":"Hel"`, 1), Expect{}},
		{"responses sequence gap", ProtoResponses, strings.Replace(goodResponses, `"sequence_number":2`, `"sequence_number":5`, 1), Expect{}},
		{"responses done text differs", ProtoResponses, strings.Replace(goodResponses, `"text":"Hi there"`, `"text":"Hi"`, 1), Expect{}},
		{"responses without terminal event", ProtoResponses, goodResponses[:strings.Index(goodResponses, "event: response.completed")], Expect{}},
		{"messages without message_stop", ProtoMessages, goodMessages[:strings.Index(goodMessages, "event: message_stop")], Expect{}},
		{"messages stop leaked", ProtoMessages, goodMessages, Expect{Stops: []string{"es"}}},
		{"messages ids not increasing", ProtoMessages, "id: 1\n" + strings.Replace(goodMessages, "event: ping", "id: 1\nevent: ping", 1), Expect{}},
	} {
		if c, err := Check(tc.proto, []byte(tc.raw), tc.want); err == nil {
			t.Errorf("%s: accepted: %+v", tc.name, c)
		}
	}
}

const (
	wholeChat      = `{"choices":[{"index":0,"message":{"role":"assistant","content":"One, two"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`
	wholeResponses = `{"status":"incomplete","output":[{"content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":5,"output_tokens":4,"total_tokens":9}}`
	wholeMessages  = `{"type":"message","content":[{"type":"text","text":"Yes"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`
)

// TestCheckWhole: a whole response of each shape passes; one that breaks a
// content rule or whose usage does not add up is caught.
func TestCheckWhole(t *testing.T) {
	for _, tc := range []struct {
		proto Proto
		raw   string
		want  Expect
		ok    bool
	}{
		{ProtoOpenAI, wholeChat, Expect{MaxTokens: 4, Stops: []string{"three"}}, true},
		{ProtoResponses, wholeResponses, Expect{MaxTokens: 4}, true},
		{ProtoMessages, wholeMessages, Expect{MaxTokens: 4}, true},
		{ProtoOpenAI, wholeChat, Expect{MaxTokens: 4, Stops: []string{", "}}, false},            // stop string leaked
		{ProtoOpenAI, wholeChat, Expect{MaxTokens: 5}, false},                                   // a length finish short of max_tokens
		{ProtoOpenAI, strings.Replace(wholeChat, `:13`, `:14`, 1), Expect{MaxTokens: 4}, false}, // total ≠ prompt + completion
		{ProtoResponses, strings.Replace(wholeResponses, `:9`, `:8`, 1), Expect{MaxTokens: 4}, false},
		{ProtoMessages, strings.Replace(wholeMessages, `"Yes"`, `"Y\xffs"`, 1), Expect{}, false}, // invalid UTF-8
		{ProtoMessages, strings.Replace(wholeMessages, `"output_tokens":1`, `"output_tokens":0`, 1), Expect{}, false},
	} {
		if c, err := CheckWhole(tc.proto, []byte(tc.raw), tc.want); (err == nil) != tc.ok {
			t.Errorf("%s %s %+v: %+v, %v; want ok=%v", tc.proto, tc.raw, tc.want, c, err, tc.ok)
		}
	}
}

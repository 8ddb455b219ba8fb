package main

import (
	"strings"
	"testing"
	"time"
)

func TestReadChatStream(t *testing.T) {
	const role = `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	tests := []struct {
		name, body string
		want       string
		tokens     int
		finish     string
		wantErr    string
	}{
		{"whole stream", "id: 1\ndata: " + role + "\n\n: keep-alive\n\nid: 2\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
			"id: 3\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo 日本\"}}]}\n\nid: 4\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
			"id: 5\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\nid: 6\ndata: [DONE]\n\n", "Hello 日本", 3, "stop", ""},
		{"in-band error", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"stalled\",\"code\":\"stall_timeout\"}}\n\ndata: [DONE]\n\n",
			"a", 0, "", "stall_timeout"},
		{"cut before [DONE]", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "a", 0, "", "before [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got strings.Builder
			st, err := readChatStream(strings.NewReader(tt.body), time.Now(), func(s string) { got.WriteString(s) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want || st.tokens != tt.tokens || st.finish != tt.finish {
				t.Errorf("text %q tokens %d finish %q", got.String(), st.tokens, st.finish)
			}
		})
	}
}

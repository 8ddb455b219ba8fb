package llmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// testKey is the API key TestRouter's replicas want (the chart with keys
// set); a replica without keys ignores it.
const testKey = "sk-llmd-test"

type msg struct{ Role, Content string }

func (m msg) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"role": m.Role, "content": m.Content})
}

// result is one chat completion as the client saw it.
type result struct {
	upstream string // the replica Envoy forwarded to (x-sluice-upstream)
	cached   int    // usage.prompt_tokens_details.cached_tokens
	prompt   int
	reply    string
}

// client has no connection reuse across tests' phases to hide: each
// request may go to either replica, and Envoy's upstream choice is per
// request anyway.
var client = &http.Client{Timeout: 120 * time.Second}

func chatBody(msgs []msg, maxTokens int, stream bool, extra map[string]any) []byte {
	body := map[string]any{"model": servedName, "messages": msgs, "max_tokens": maxTokens,
		"temperature": 0, "stream": stream}
	if stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	return b
}

// chat sends a non-streaming chat completion to base.
func chat(ctx context.Context, base string, msgs []msg, maxTokens int) (result, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(chatBody(msgs, maxTokens, false, nil)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return result{}, fmt.Errorf("%d: %s", resp.StatusCode, b)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return result{}, fmt.Errorf("bad completion %q: %v", b, err)
	}
	return result{upstream: resp.Header.Get("x-sluice-upstream"), cached: out.Usage.PromptTokensDetails.CachedTokens,
		prompt: out.Usage.PromptTokens, reply: out.Choices[0].Message.Content}, nil
}

// timing is one streamed completion: time to the first content token and
// the gaps between the following ones.
type timing struct {
	upstream string
	ttft     time.Duration
	itl      []time.Duration
	// chunks counts content chunks; generated is usage.completion_tokens.
	// They differ when the detokenizer holds a token back (a partial UTF-8
	// character or a possible stop string) and sends it with the next one.
	chunks    int
	generated int
}

// stream sends a streaming chat completion and times its content chunks
// (about one token each: no --flush-interval). With stopAfter > 0 it closes the
// connection after that many tokens and returns when it did.
func stream(ctx context.Context, base string, msgs []msg, maxTokens, stopAfter int) (timing, error) {
	body := chatBody(msgs, maxTokens, true, map[string]any{"ignore_eos": true})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return timing{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return timing{}, fmt.Errorf("%d: %s", resp.StatusCode, b)
	}
	tm := timing{upstream: resp.Header.Get("x-sluice-upstream")}
	last := t0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct{ Content string }
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if json.Unmarshal([]byte(line[6:]), &ev) != nil {
			continue
		}
		if ev.Usage != nil {
			tm.generated = ev.Usage.CompletionTokens
		}
		if len(ev.Choices) == 0 || ev.Choices[0].Delta.Content == "" {
			continue
		}
		now := time.Now()
		if tm.chunks == 0 {
			tm.ttft = now.Sub(t0)
		} else {
			tm.itl = append(tm.itl, now.Sub(last))
		}
		last = now
		tm.chunks++
		if stopAfter > 0 && tm.chunks >= stopAfter {
			cancel()
			return tm, nil
		}
	}
	if err := sc.Err(); err != nil {
		return tm, err
	}
	return tm, nil
}

// metrics scrapes a replica's /metrics into name{labels} -> value.
func metrics(base string) (map[string]float64, error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metric is the value of the first series of family name.
func metric(m map[string]float64, name string) (float64, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.HasPrefix(k, name+"{") {
			return v, true
		}
	}
	return 0, false
}

var modelLabel = regexp.MustCompile(`model_name="([^"]*)"`)

// modelNames lists the model_name label values among the vllm: series.
func modelNames(m map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		if strings.HasPrefix(k, "vllm:") {
			if sm := modelLabel.FindStringSubmatch(k); sm != nil {
				out[sm[1]] = true
			}
		}
	}
	return out
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench"
)

// runChat: sluice chat --url http://localhost:8080 — a terminal chat client.
// Replies stream as they are generated; after each, time to first token and
// decode speed go to stderr. Ctrl-C stops a reply; /reset forgets the
// conversation; Ctrl-D or /quit leaves.
func runChat(args []string) error {
	var c chatClient
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.StringVar(&c.url, "url", "http://localhost:8080", "server base URL")
	fs.StringVar(&c.model, "model", "", "model name (default: the server's)")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("SLUICE_API_KEY"), "API key (default $SLUICE_API_KEY)")
	system := fs.String("system", "", "system prompt")
	fs.IntVar(&c.maxTokens, "max-tokens", 512, "longest reply in tokens")
	fs.Float64Var(&c.temperature, "temperature", 0.7, "sampling temperature (0 = greedy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.url = strings.TrimRight(c.url, "/")
	c.out = os.Stdout
	if *system != "" {
		c.history = append(c.history, chatMsg{"system", *system})
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintf(os.Stderr, "chatting with %s (/reset, /quit)\n", c.url)
	for {
		fmt.Fprint(os.Stderr, "\n> ")
		if !in.Scan() {
			fmt.Fprintln(os.Stderr)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		case "/reset":
			c.history = c.history[:0]
			if *system != "" {
				c.history = append(c.history, chatMsg{"system", *system})
			}
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-interrupts:
				cancel()
			case <-ctx.Done():
			}
		}()
		st, err := c.turn(ctx, line)
		cancel()
		fmt.Fprintln(c.out)
		switch {
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(os.Stderr, "[stopped]")
		case err != nil:
			fmt.Fprintf(os.Stderr, "[error: %v]\n", err)
		default:
			fmt.Fprintf(os.Stderr, "[TTFT %v · %d tokens · %.1f tokens/s · %s]\n",
				st.ttft.Round(time.Millisecond), st.tokens, st.tokensPerSec(), st.finish)
		}
	}
}

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatClient struct {
	url, model, apiKey string
	maxTokens          int
	temperature        float64
	history            []chatMsg
	out                io.Writer
}

// turnStats are one reply's client-side figures.
type turnStats struct {
	ttft, decode time.Duration // request → first text; first text → end
	tokens       int
	finish       string
}

func (s turnStats) tokensPerSec() float64 {
	if s.tokens < 2 || s.decode <= 0 {
		return 0
	}
	return float64(s.tokens-1) / s.decode.Seconds() // the first token is TTFT's
}

// turn sends the user's line with the history and streams the reply to out.
func (c *chatClient) turn(ctx context.Context, line string) (turnStats, error) {
	c.history = append(c.history, chatMsg{"user", line})
	body, _ := json.Marshal(map[string]any{
		"model": c.model, "messages": c.history, "stream": true, "max_tokens": c.maxTokens,
		"temperature": c.temperature, "stream_options": map[string]bool{"include_usage": true},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", c.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return turnStats{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.history = c.history[:len(c.history)-1]
		return turnStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.history = c.history[:len(c.history)-1]
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return turnStats{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var reply strings.Builder
	st, err := readChatStream(resp.Body, start, func(text string) {
		reply.WriteString(text)
		fmt.Fprint(c.out, text)
	})
	// A stopped reply still joins the history: the user saw it.
	c.history = append(c.history, chatMsg{"assistant", reply.String()})
	return st, err
}

// readChatStream parses SSE chat chunks, calling onText for each piece of
// text, until [DONE].
func readChatStream(body io.Reader, start time.Time, onText func(string)) (turnStats, error) {
	var st turnStats
	var first time.Time
	errDone := errors.New("[DONE]")
	err := bench.ReadEvents(body, func(data []byte) error {
		if string(data) == "[DONE]" {
			if !first.IsZero() {
				st.decode = time.Since(first)
			}
			return errDone
		}
		var chunk struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct{ Message, Code string } `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return fmt.Errorf("bad chunk %q: %w", data, err)
		}
		if chunk.Error != nil {
			return fmt.Errorf("server: %s (%s)", chunk.Error.Message, chunk.Error.Code)
		}
		if chunk.Usage != nil {
			st.tokens = chunk.Usage.CompletionTokens
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				if first.IsZero() {
					first = time.Now()
					st.ttft = first.Sub(start)
				}
				onText(ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				st.finish = *ch.FinishReason
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errDone):
		return st, nil
	case err == nil:
		return st, errors.New("stream ended before [DONE]")
	}
	return st, err
}

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/tokenizer"
)

// runGenerate: sluice generate --model PATH --prompt TEXT. The completion goes
// to stdout as it is generated; speed figures go to stderr.
func runGenerate(args []string) error { return generate(args, os.Stdout, os.Stderr) }

// generate is runGenerate writing to stdout and stderr (tests read them).
func generate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", os.Getenv("SLUICE_MODEL"), "model file (.gguf)")
	prompt := fs.String("prompt", "", "prompt text")
	chat := fs.Bool("chat", false, "wrap the prompt as a user message in the model's chat template")
	system := fs.String("system", "", "system message (with --chat)")
	maxTokens := fs.Int("max-tokens", 256, "tokens to generate at most")
	threads := fs.Int("threads", runtime.NumCPU(), "CPU threads")
	var sp engine.SamplingParams
	fs.Func("temperature", "sampling temperature (0 = greedy, the default)", floatFlag(&sp.Temperature))
	fs.IntVar(&sp.TopK, "top-k", 0, "keep the k most likely tokens (0 = off)")
	fs.Func("top-p", "nucleus sampling mass (0 or 1 = off)", floatFlag(&sp.TopP))
	fs.Func("min-p", "drop tokens below this fraction of the best one's probability", floatFlag(&sp.MinP))
	fs.Func("repeat-penalty", "repetition penalty (1 = off)", floatFlag(&sp.RepetitionPenalty))
	fs.Func("seed", "sampling seed (same seed + prompt = same output)", func(s string) error {
		var v uint64
		_, err := fmt.Sscan(s, &v)
		sp.Seed = &v
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *prompt == "" {
		return errors.New("--model and --prompt are required")
	}
	load := time.Now()
	m, err := loader.Load(*model, loader.Options{Threads: *threads, MaxSeqs: 1})
	if err != nil {
		return err
	}
	defer m.Close(context.Background())
	fmt.Fprintf(stderr, "loaded %s in %v (%d threads)\n", m.ID, time.Since(load).Round(time.Millisecond), *threads)

	text := *prompt
	if *chat {
		var msgs []tokenizer.Message
		if *system != "" {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: *system})
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: *prompt})
		if text, err = m.Tokenizer.ApplyChatTemplate(msgs, true); err != nil {
			return err
		}
	}
	ids := m.Tokenizer.Encode(text, true)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	seq, err := m.Engine.Submit(ctx, engine.Request{ID: "cli", Prompt: ids, MaxTokens: *maxTokens, Sampling: sp})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	dec := m.Tokenizer.NewDecoder()
	var first time.Time
	n := 0
	for tok := range seq.Tokens() {
		if n == 0 {
			first = time.Now()
		}
		n++
		if m.Tokenizer.IsEOG(tok.ID) {
			continue
		}
		out.WriteString(dec.Add(tok.ID))
		out.Flush() // stream: the user reads while the model writes
	}
	out.WriteString(dec.Flush())
	out.WriteString("\n")
	out.Flush()
	res := seq.Result()
	end := time.Now()
	if n > 0 {
		prefill := first.Sub(start)
		fmt.Fprintf(stderr, "prompt: %d tokens in %v (%.1f tokens/s)\n", len(ids), prefill.Round(time.Millisecond), float64(len(ids))/prefill.Seconds())
		if n > 1 {
			decode := end.Sub(first)
			fmt.Fprintf(stderr, "decode: %d tokens in %v (%.1f tokens/s)\n", n-1, decode.Round(time.Millisecond), float64(n-1)/decode.Seconds())
		}
	}
	fmt.Fprintf(stderr, "finish: %s %s\n", res.Finish, res.Cause)
	if res.Err != nil {
		return res.Err
	}
	return nil
}

func floatFlag(dst *float32) func(string) error {
	return func(s string) error {
		var v float64
		_, err := fmt.Sscan(s, &v)
		*dst = float32(v)
		return err
	}
}

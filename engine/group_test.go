package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/kernels"
)

func submitGroup(t testing.TB, e *Engine, ctx context.Context, reqs []Request) []*Sequence {
	t.Helper()
	seqs, err := e.SubmitGroup(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

func choices(n int, req Request) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = req
		if req.Sampling.Seed != nil {
			seed := *req.Sampling.Seed + uint64(i)
			reqs[i].Sampling.Seed = &seed
		}
	}
	return reqs
}

// Greedy choices of one prompt all equal the cache-free reference, so the
// forked block tables hold the right KV, and the prompt is computed once:
// each other choice computes only the prompt's last partial block.
func TestGroupSharesPrefill(t *testing.T) {
	for _, tc := range []struct {
		name        string
		plen, bs    int
		wantPrompt  int64
		maxBatchTok int
	}{
		{"partial last block", 37, 16, 37 + 2*5, 0}, // 32 shared, 5 recomputed per choice
		{"exact blocks", 32, 16, 32 + 2*16, 0},      // one token is always recomputed: a block
		{"prompt in chunks", 37, 4, 37 + 2*1, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newHashModel(64, 1024, 64, tc.bs)
			e := newTestEngine(t, m, Config{DisablePrefixCache: true, MaxBatchTokens: tc.maxBatchTok})
			p := prompt(tc.plen, 3, 64)
			want := m.reference(p, 12)
			seqs := submitGroup(t, e, bg, choices(3, Request{Prompt: p, MaxTokens: 12}))
			for i, s := range seqs {
				got, r := collect(t, s, 0)
				if !slices.Equal(got, want) {
					t.Fatalf("choice %d: %v\nwant %v", i, got, want)
				}
				if r.Finish != FinishLength || r.PromptTokens != tc.plen || r.CompletionTokens != 12 {
					t.Fatalf("choice %d: %+v", i, r)
				}
			}
			if got := e.Stats().PromptTokens; got != tc.wantPrompt {
				t.Fatalf("%d prompt tokens computed, want %d (%d without the fork)", got, tc.wantPrompt, 3*tc.plen)
			}
		})
	}
}

// Each choice samples its own stream: choice i of a group draws exactly what
// a request alone with seed+i draws, and the streams differ.
func TestGroupChoicesSampleOwnStreams(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	e := newTestEngine(t, m, Config{})
	seed := uint64(41)
	req := Request{Prompt: prompt(21, 5, 64), MaxTokens: 16, Sampling: SamplingParams{Temperature: 1.5, Seed: &seed}}
	seqs := submitGroup(t, e, bg, choices(4, req))
	var outs [][]int32
	for i, s := range seqs {
		got, _ := collect(t, s, 0)
		alone, _ := collect(t, submit(t, e, choices(4, req)[i]), 0)
		if !slices.Equal(got, alone) {
			t.Fatalf("choice %d: %v\nalone with seed+%d: %v", i, got, i, alone)
		}
		outs = append(outs, got)
	}
	if slices.Equal(outs[0], outs[1]) && slices.Equal(outs[1], outs[2]) {
		t.Fatalf("every choice drew the same tokens: %v", outs[0])
	}
}

// Stop tokens end each choice on its own; the others go on to their length.
func TestGroupChoicesFinishIndependently(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	e := newTestEngine(t, m, Config{})
	p := prompt(19, 2, 64)
	ref := m.reference(p, 10)
	reqs := choices(2, Request{Prompt: p, MaxTokens: 10})
	reqs[1].StopTokens = []int32{ref[3]}
	seqs := submitGroup(t, e, bg, reqs)
	a, ra := collect(t, seqs[0], 0)
	b, rb := collect(t, seqs[1], 0)
	if !slices.Equal(a, ref) || ra.Finish != FinishLength {
		t.Fatalf("choice 0: %v %+v", a, ra)
	}
	if i := slices.Index(ref, ref[3]); !slices.Equal(b, ref[:i]) || rb.Finish != FinishStop {
		t.Fatalf("choice 1: %v %+v, want %v then stop", b, rb, ref[:i])
	}
}

// A cancelled context ends every choice, forked or still waiting for the
// fork, and all their blocks are back before the next step; no goroutine
// is left behind.
func TestGroupCancelFreesEveryChoice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps int // steps run before the cancel
	}{
		{"before the fork", 0}, {"during prefill", 1}, {"mid-decode", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newHashModel(64, 4096, 64, 8)
				e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 8, MaxBatchTokens: 16, DisablePrefixCache: true})
				ls := newLockstep(m, e)
				synctest.Wait()
				baseline := bubbleGoroutines()
				ctx, cancel := context.WithCancel(bg)
				seqs := submitGroup(t, e, ctx, choices(3, Request{Prompt: prompt(30, 1, 64), MaxTokens: 50}))
				for range tc.steps {
					ls.next()
					ls.release()
				}
				cancel()
				synctest.Wait() // the aborts are in the loop's channel; the loop is parked in Forward
				stop := ls.freeRun()
				for i, s := range seqs {
					if _, r := collect(t, s, 0); r.Finish != FinishAbort || r.Cause != CauseClientDisconnect {
						t.Fatalf("choice %d: %+v", i, r)
					}
				}
				stop()
				synctest.Wait()
				if st := e.Stats(); st.KV.Used != 0 || st.Running+st.Waiting != 0 || st.Aborted != 3 {
					t.Fatalf("stats %+v", st)
				}
				// Forked tables share blocks, so the tables' sum exceeds the
				// blocks in use; a leaked block would make it fall short.
				for i, r := range ls.rec {
					if r.used > r.tableBlock {
						t.Fatalf("step %d: %d blocks used, batch tables hold %d", i, r.used, r.tableBlock)
					}
				}
				if n := bubbleGoroutines(); n != baseline {
					t.Fatalf("%d goroutines, baseline %d", n, baseline)
				}
			})
		})
	}
}

// A leader that ends before its prompt is computed leaves its choices to
// compute the prompt themselves; they still produce the reference.
func TestGroupLeaderEndsBeforeFork(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	// The first prompt chunk is held until the abort is sent: otherwise a
	// fast loop may finish all of the leader's 8 tokens before Abort runs.
	gate := make(chan struct{})
	m.onForward = func(*kernels.Batch) error { <-gate; return nil }
	e := newTestEngine(t, m, Config{DisablePrefixCache: true, MaxBatchTokens: 8})
	p := prompt(25, 4, 64)
	seqs := submitGroup(t, e, bg, choices(3, Request{Prompt: p, MaxTokens: 8}))
	seqs[0].Abort(CauseStall)
	close(gate)
	if _, r := collect(t, seqs[0], 0); r.Finish != FinishAbort {
		t.Fatalf("leader: %+v", r)
	}
	want := m.reference(p, 8)
	for i, s := range seqs[1:] {
		if got, r := collect(t, s, 0); !slices.Equal(got, want) || r.Finish != FinishLength {
			t.Fatalf("choice %d: %v %+v, want %v", i+1, got, r, want)
		}
	}
}

// Close ends a group whose leader is still prefilling: the choices not yet
// forked end with it, each stream closed with the shutdown cause.
func TestGroupShutdown(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	gate := make(chan struct{})
	m.onForward = func(*kernels.Batch) error { <-gate; return nil }
	e, err := New(m, Config{Blocks: 64, BlockSize: 8, MaxBatchTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	seqs := submitGroup(t, e, bg, choices(3, Request{Prompt: prompt(25, 4, 64), MaxTokens: 100}))
	closed := make(chan error)
	go func() { closed <- e.Close(bg) }()
	<-e.stop // Close has begun; the loop is held in its first step
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if _, r := collect(t, s, 0); r.Finish != FinishAbort || r.Cause != CauseShutdown {
			t.Fatalf("choice %d: %+v", i, r)
		}
	}
}

func TestSubmitGroupRefusals(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	e := newTestEngine(t, m, Config{MaxQueue: 4})
	p := prompt(10, 1, 64)
	differ := choices(2, Request{Prompt: p})
	differ[1].Prompt = prompt(10, 2, 64)
	resumed := choices(2, Request{Prompt: p})
	resumed[0].Resume = []int32{1}
	for _, tc := range []struct {
		name string
		reqs []Request
		want error
	}{
		{"empty", nil, ErrInvalidRequest},
		{"too many", choices(MaxChoices+1, Request{Prompt: p}), ErrInvalidRequest},
		{"prompts differ", differ, ErrInvalidRequest},
		{"resume", resumed, ErrInvalidRequest},
		{"bad choice", append(choices(1, Request{Prompt: p}), Request{Prompt: p, MaxTokens: -1}), ErrInvalidRequest},
		{"more than the queue", choices(5, Request{Prompt: p}), ErrQueueFull},
	} {
		if _, err := e.SubmitGroup(bg, tc.reqs); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if st := e.Stats(); st.Waiting+st.Running != 0 {
		t.Fatalf("a refused group left sequences: %+v", st)
	}
}

// On the real Llama forward pass, greedy choices forked from one prefill
// give the solo greedy output: the shared blocks' KV and the recomputed
// partial block are exactly what the lone run attends to.
func testGroupOn(t *testing.T, path string, vocab int) {
	m := loadModel(t, path, 2, 64, 16, 128, 8)
	p := prompt(37, 5, vocab)
	solo, margins := soloRuns(t, m, newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 128, MaxSeqs: 8}), [][]int32{p}, 8)
	e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 128, MaxSeqs: 8, DisablePrefixCache: true})
	for i, s := range submitGroup(t, e, bg, choices(4, Request{Prompt: p, MaxTokens: 8})) {
		got, _ := collect(t, s, 0)
		sameGreedy(t, "choice "+string(rune('0'+i)), got, solo[0], margins[0])
	}
	if got, want := e.Stats().PromptTokens, int64(37+3*5); got != want {
		t.Fatalf("%d prompt tokens computed, want %d (one prefill, 5 recomputed per other choice)", got, want)
	}
}

func TestTinyModelGroup(t *testing.T) { testGroupOn(t, tinyModelPath(t), tinySpec.Vocab) }

func TestSmolLM2Group(t *testing.T) { testGroupOn(t, smolPath(t), 49152) }

// BenchmarkSmolLM2Choices: n choices of one 300-token prompt, each to 8
// tokens, as one group (one prefill, forks) and as n lone requests (each
// computing the prompt; no prefix cache, which would otherwise stand in for
// the fork): wall time and prompt tokens computed per request.
func BenchmarkSmolLM2Choices(b *testing.B) {
	m := loadModel(b, smolPath(b), 2, 256, 16, 512, 16)
	p := prompt(300, 9, 49152)
	for _, n := range []int{1, 4, 8} {
		for _, grouped := range []bool{true, false} {
			name := fmt.Sprintf("n=%d/lone", n)
			if grouped {
				name = fmt.Sprintf("n=%d/group", n)
			}
			b.Run(name, func(b *testing.B) {
				e := newEngineOn(b, m, Config{Blocks: 256, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: 16, DisablePrefixCache: true})
				reqs := choices(n, Request{Prompt: p, MaxTokens: 8})
				for b.Loop() {
					var seqs []*Sequence
					if grouped {
						seqs = submitGroup(b, e, bg, reqs)
					} else {
						for _, r := range reqs {
							seqs = append(seqs, submit(b, e, r))
						}
					}
					for _, s := range seqs {
						collect(b, s, 0)
					}
				}
				b.ReportMetric(float64(e.Stats().PromptTokens)/float64(b.N), "prompt-tok/op")
			})
		}
	}
}

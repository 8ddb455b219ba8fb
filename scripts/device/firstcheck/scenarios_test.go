package firstcheck

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFirstAllPass: every stage passes; the summary ends with a PASS verdict
// that carries the bench figures, the cuBLAS of the CUDA 13 wheel is the one
// the later stages load, and the summary was rewritten before every stage.
func TestFirstAllPass(t *testing.T) {
	t.Parallel()
	r := firstSH(t)
	if r.code != 0 {
		t.Errorf("exit %d, want 0:\n%s", r.code, r.stdout)
	}
	r.outFiles(t, "bench.md", "logs.tgz", "summary.md")
	s := r.summary(t)
	last := lastLine(s)
	if !strings.HasPrefix(last, "VERDICT: PASS") {
		t.Errorf("last line %q, want the PASS verdict", last)
	}
	contains(t, "verdict", last, "batch 1: 125.0 tok/s (42% of the floor), graphs 166.7 tok/s (56% of the floor)",
		"batch 256: 125.0 tok/s", "256 without cuBLAS: 166.7 tok/s")
	contains(t, "summary", s, "GPU: NVIDIA H200", "driver: 580.65.06", "nvidia/cu13/lib/libcublas.so.13",
		"cold JIT: 8 modules, load 812 ms (compile 790 ms), backend 1", "warm JIT: 8 modules, load 9 ms (compile 0 ms), backend 2", "tests: 4 passed, 0 failed", "real model real-model.gguf (4 layers, vocab 49152): greedy agreement 8/8", "4000 GB/s",
		"| diagnose | not needed |")
	// the jit stage's binary was given the wheel's cuBLAS; the last bench ran without
	contains(t, "summary", s, "GEMM path: cuBLAS 13.1.0 ("+filepath.Join(filepath.Dir(r.out), "site/nvidia/cu13/lib/libcublas.so.13")+")")
	snaps := r.snapshots(t)
	// jit ×2, ops, model, bench, benchmma
	if len(snaps) != 6 {
		t.Fatalf("%d stub starts, want 6", len(snaps))
	}
	for i, want := range []string{"| jit | running", "| jit | running", "| ops | running", "| model | running", "| bench | running", "| benchmma | running"} {
		contains(t, "summary during a stage", snaps[i], want, "VERDICT: INCOMPLETE")
	}
	contains(t, "summary during ops", snaps[2], "| jit | ok", "| model | pending")
	contains(t, "summary during bench", snaps[4], "| bandwidth | ok", "4000 GB/s")
	if len(r.stdout) > 6000 {
		t.Errorf("stdout is %d bytes; the device tool returns 12 KB", len(r.stdout))
	}
	if !strings.HasPrefix(lastLine(r.stdout), "VERDICT: PASS") {
		t.Errorf("stdout ends %q, want the verdict", lastLine(r.stdout))
	}
	logs := r.logs(t)
	for _, n := range []string{"env.log", "cublas.log", "jit.log", "ops.log", "model.log", "bandwidth.log", "bench.log", "benchmma.md", "first.log"} {
		if _, ok := logs[n]; !ok {
			t.Errorf("logs.tgz lacks %s", n)
		}
	}
	b, err := os.ReadFile(filepath.Join(r.out, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	contains(t, "bench.md", string(b), "## bench: ok", "| 256 (graphs) |", "## benchmma: ok")
}

// TestFirstTrouble: an op test hangs, a model test fails, the first bench
// ignores SIGQUIT. The hang becomes a goroutine dump naming the stuck frame
// and a rerun of that test alone names its kernel; the ops stage, whose own
// limit is far beyond the budget, is cut so that every later stage still
// runs; the stuck bench is killed and the next bench still runs; the whole
// run stays within its budget and the verdict, last, names all of it.
func TestFirstTrouble(t *testing.T) {
	t.Parallel()
	const budget = 24
	r := firstSH(t, "STUB_PLAN=TestAttention=hang,TestBatchInvariance=fail,TestDecodeThroughput=stuck1",
		"BUDGET=24", "LIMIT_ops=1000")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if r.took > (budget+2)*time.Second {
		t.Errorf("took %v, budget %ds", r.took, budget)
	}
	r.outFiles(t, "bench.md", "logs.tgz", "summary.md")
	s := r.summary(t)
	last := lastLine(s)
	contains(t, "verdict", last, "VERDICT: FAIL", "ops hung in TestAttention", "model failed: TestBatchInvariance",
		"last kernel launched: paged_decode_128", "256 without cuBLAS: 166.7 tok/s")
	contains(t, "summary", s, "| ops | TIMEOUT after", "(SIGQUIT: goroutine dump in logs.tgz)", "hung in: TestAttention",
		"firstcheck/testdata/stub/kernel.Launch", "| model | FAIL (exit 1)", "logits differ by 0.31",
		"rerun alone with SLUICE_CUDA_TRACE=1: ops TestAttention", "paged_decode_128 grid [8 1 1]",
		"| bandwidth | ok", "| bench | TIMEOUT after 3s (no exit on SIGQUIT: killed)", "| benchmma | ok")
	logs := r.logs(t)
	contains(t, "ops.log", logs["ops.log"], "SIGQUIT: quit", "goroutine 1 ", "[sleep]", "kernel.Launch(")
	d := logs["diagnose.log"]
	contains(t, "diagnose.log", d, "=== RUN   TestAttention", "cuda trace: launch 2/2 paged_decode_128")
	if strings.Contains(d, "TestRMSNorm") {
		t.Errorf("the diagnosis ran more than the hung test:\n%s", d)
	}
}

// TestFirstKilled: the device tool may kill the whole run at any moment;
// the summary it leaves says where, as its last line.
func TestFirstKilled(t *testing.T) {
	t.Parallel()
	cmd, r, _ := start(t, "STUB_PLAN=TestAttention=stuck", "LIMIT_ops=20")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// wait for the ops stage's stub to have started, then kill everything
	deadline := time.Now().Add(20 * time.Second)
	for !opsStarted(r.snap) {
		if time.Now().After(deadline) {
			t.Fatal("the ops stage never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	last := lastLine(r.summary(t))
	if !strings.HasPrefix(last, "VERDICT: INCOMPLETE — the run stopped during ops") {
		t.Errorf("last line %q, want INCOMPLETE during ops", last)
	}
}

func opsStarted(snap string) bool {
	ents, _ := os.ReadDir(snap)
	for _, e := range ents {
		if b, _ := os.ReadFile(filepath.Join(snap, e.Name())); strings.Contains(string(b), "| ops | running") {
			return true
		}
	}
	return false
}

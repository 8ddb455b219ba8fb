// Command stub stands in for the device test binaries (cuda-ops.test,
// cuda-model.test) in first_test.go: it takes go test's flags, "runs" the
// tests its name lists that -test.run selects, each as STUB_PLAN says (pass,
// fail, hang: block until SIGQUIT's goroutine dump, stuck: ignore SIGQUIT
// and block until killed, stuck1: stuck the first time only), and prints
// what the real ones print that first.sh reads. Each start copies
// $STUB_OUT/summary.md to $STUB_SNAP, so the test sees the summary as it was
// while each stage ran.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/scripts/device/firstcheck/testdata/stub/kernel"
)

var lists = map[string][]string{
	"cuda-ops.test":   {"TestJITTime", "TestRMSNorm", "TestAttention", "TestMatMul"},
	"cuda-model.test": {"TestForwardMatchesCPU", "TestBatchInvariance", "TestGraphsReplay", "TestRealModelMatchesCPU", "TestDecodeThroughput"},
}

func main() {
	run := flag.String("test.run", "", "")
	flag.Bool("test.v", false, "")
	flag.Int("test.count", 1, "")
	flag.Duration("test.timeout", 0, "")
	flag.Parse()
	name := filepath.Base(os.Args[0])
	snapshot(name, *run)
	re, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	plan := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("STUB_PLAN"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			plan[k] = v
		}
	}
	failed := false
	for _, t := range lists[name] {
		if !re.MatchString(t) {
			continue
		}
		fmt.Printf("=== RUN   %s\n", t)
		switch plan[t] {
		case "fail":
			fmt.Printf("    %s_test.go:42: logits differ by 0.31 relative, bound 5e-2\n--- FAIL: %s (0.01s)\n", strings.ToLower(t), t)
			failed = true
			continue
		case "hang":
			hang(false)
		case "stuck":
			hang(true)
		case "stuck1":
			mark := filepath.Join(os.Getenv("STUB_SNAP"), "stuck1")
			if _, err := os.Stat(mark); err != nil {
				os.WriteFile(mark, nil, 0o644)
				hang(true)
			}
		}
		pass(t)
		fmt.Printf("--- PASS: %s (0.01s)\n", t)
	}
	if failed {
		fmt.Println("FAIL")
		os.Exit(1)
	}
	fmt.Println("PASS")
}

func pass(t string) {
	switch t {
	case "TestJITTime":
		fmt.Println("    jit_test.go:28: JIT: 8 modules, load 812 ms (compile 790 ms), backend 1 of this process (driver cache " + os.Getenv("CUDA_CACHE_PATH") + ")")
		fmt.Println("    jit_test.go:28: JIT: 8 modules, load 9 ms (compile 0 ms), backend 2 of this process (driver cache " + os.Getenv("CUDA_CACHE_PATH") + ")")
		fmt.Println("    jit_test.go:31: GEMM path: cuBLAS 13.1.0 (" + os.Getenv("SLUICE_CUBLAS") + ")")
	case "TestRealModelMatchesCPU":
		fmt.Println("    real_test.go:98: real model real-model.gguf (4 layers, vocab 49152): greedy agreement 8/8, worst ‖cuda−cpu‖/‖cpu‖ of the logits 5.49e-03")
	case "TestDecodeThroughput":
		var b strings.Builder
		b.WriteString("Decode, random BF16 model (stub)\n\n| batch | prefill tok/s | ms/step | decode tok/s | weight GB/s (bytes/step ÷ time) | of the floor | launches/step |\n|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range strings.Split(os.Getenv("SLUICE_CUDA_BENCH_BATCHES"), ",") {
			fmt.Fprintf(&b, "| %s | 9000 | 8.00 | 125.0 | 2000 | 42%% | 200 |\n| %s (graphs) | 9000 | 6.00 | 166.7 | 2667 | 56%% | 200 |\n", n, n)
		}
		os.WriteFile(os.Getenv("SLUICE_CUDA_BENCH_OUT"), []byte(b.String()), 0o644)
	}
}

// hang is a test whose kernel never finishes. With SLUICE_CUDA_TRACE=1 it
// first names its launches, as the backend does.
func hang(ignoreQuit bool) {
	if ignoreQuit {
		signal.Ignore(syscall.SIGQUIT)
	}
	if os.Getenv("SLUICE_CUDA_TRACE") == "1" {
		fmt.Println("cuda trace: launch 1/2 rms_norm grid [1 1 1] block [256 1 1]")
		fmt.Println("cuda trace: launch 2/2 paged_decode_128 grid [8 1 1] block [128 1 1]")
	}
	kernel.Launch("paged_decode_128")
}

func snapshot(name, run string) {
	dir := os.Getenv("STUB_SNAP")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(filepath.Join(os.Getenv("STUB_OUT"), "summary.md"))
	if err != nil {
		b = []byte("no summary.md: " + err.Error())
	}
	head := fmt.Sprintf("stub %s -test.run %q\n", name, run)
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d-%s.md", time.Now().UnixNano(), name)), append([]byte(head), b...), 0o644)
}

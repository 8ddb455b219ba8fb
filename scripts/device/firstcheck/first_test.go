package firstcheck

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeTools writes stand-ins for the device machine's nvidia-smi and Python
// (env and bandwidth stages; findcublas.py runs on the real python3 against
// a fake wheel tree) into dir.
func fakeTools(t *testing.T, dir string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	write(t, filepath.Join(dir, "nvidia-smi"), `#!/bin/sh
case "$*" in
*driver_version*) echo 580.65.06 ;;
*query-gpu*) echo "NVIDIA H200, 143771 MiB, 3201 MHz" ;;
*) echo "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0 |" ;;
esac
`)
	write(t, filepath.Join(dir, "python"), `#!/bin/sh
case "$1" in
*findcublas.py) exec `+py+` "$@" --no-torch ;;
-) cat >/dev/null; echo "copy bandwidth (read+write): 4000 GB/s"; echo "batch-1 floor: 16.06 GB per token / 4.00 TB/s = 249 tokens/s" ;;
-c) echo "2.9.0 cuda 13.0" ;;
*) exec `+py+` "$@" ;;
esac
`)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}

var stubBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "firststub")
	if err != nil {
		panic(err)
	}
	stubBin = filepath.Join(dir, "stub")
	cmd := exec.Command("go", "build", "-o", stubBin, "./testdata/stub")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		panic("building the stub: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run is one first.sh run in its own directories.
type run struct {
	out, snap, stdout string
	code              int
	took              time.Duration
}

// start prepares a run: bin/ with the stub as both test binaries, a fake
// CUDA 13 wheel on PYTHONPATH, the tools, and env on top of small limits.
func start(t *testing.T, env ...string) (*exec.Cmd, *run, *strings.Builder) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root := t.TempDir()
	r := &run{out: filepath.Join(root, "out"), snap: filepath.Join(root, "snap")}
	bin, tools, lib := filepath.Join(root, "bin"), filepath.Join(root, "tools"), filepath.Join(root, "site", "nvidia", "cu13", "lib")
	for _, d := range []string{r.snap, bin, tools, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub, err := os.ReadFile(stubBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cuda-ops.test", "cuda-model.test"} {
		write(t, filepath.Join(bin, n), string(stub))
	}
	write(t, filepath.Join(lib, "libcublas.so.13"), "")
	fakeTools(t, tools)
	cmd := exec.Command("bash", "../first.sh")
	cmd.Env = append(os.Environ(), "OUT="+r.out, "BIN="+bin, "PYTHON="+filepath.Join(tools, "python"),
		"PATH="+tools+":"+os.Getenv("PATH"), "PYTHONPATH="+filepath.Join(root, "site"), "TMPDIR="+root,
		"STUB_OUT="+r.out, "STUB_SNAP="+r.snap, "SLUICE_CUBLAS=", "STUB_PLAN=",
		"BUDGET=30", "QUIT_GRACE=1", "FINISH=1")
	for _, s := range []string{"env", "cublas", "jit", "ops", "model", "diagnose", "bandwidth", "bench", "benchmma"} {
		cmd.Env = append(cmd.Env, "LIMIT_"+s+"=3", "MIN_"+s+"=2")
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, r, &stdout
}

func firstSH(t *testing.T, env ...string) *run {
	t.Helper()
	cmd, r, stdout := start(t, env...)
	t0 := time.Now()
	err := cmd.Run()
	r.took, r.stdout = time.Since(t0), stdout.String()
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("first.sh took %v, exit %d, %d bytes of output", r.took, r.code, len(r.stdout))
	return r
}

func (r *run) summary(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// outFiles checks that $OUT holds at most 4 files and what they are.
func (r *run) outFiles(t *testing.T, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(r.out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) > 4 || !slices.Equal(got, want) {
		t.Errorf("$OUT holds %v, want %v (at most 4 files come back)", got, want)
	}
}

// logs reads logs.tgz: file name to contents.
func (r *run) logs(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(r.out, "logs.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return m
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		m[filepath.Base(h.Name)] = string(b)
	}
}

// snapshots are the summaries each stub start saw, in order: the first
// line says which binary and -test.run.
func (r *run) snapshots(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(r.snap)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			b, _ := os.ReadFile(filepath.Join(r.snap, e.Name()))
			s = append(s, string(b))
		}
	}
	return s
}

func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

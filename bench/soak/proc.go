package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is one `sluice serve` process on loopback.
type server struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	err    error // Wait's, once exited is closed
	stderr *tailBuffer
	phase  int // which of the soak's phases it serves
}

// startServer runs bin with args plus --addr on a free loopback port and
// returns once /ready answers 200.
func startServer(ctx context.Context, bin string, args []string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &server{url: "http://" + addr, exited: make(chan struct{}), stderr: &tailBuffer{max: 1 << 16}}
	s.cmd = exec.Command(bin, append(append([]string{"serve"}, args...), "--addr", addr)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server exited while starting: %v\n%s", s.err, s.stderr)
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := scrapes.c.Get(s.url + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
	s.kill()
	return nil, errors.New("server not ready within 90 s")
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) kill() { _ = s.cmd.Process.Kill(); <-s.exited }

// terminate sends SIGTERM and waits for the exit (the drain included).
func (s *server) terminate(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return time.Since(start), s.err
	case <-time.After(limit):
		s.kill()
		return time.Since(start), fmt.Errorf("no exit within %v of SIGTERM", limit)
	}
}

// scrapes reads /metrics one request at a time, each on a connection of
// its own that closes after it: a kept-alive monitoring connection (or two
// scrapes at once) would hold a server goroutine and an fd at one snapshot
// and not at another, and read as a leak or hide one.
var scrapes = struct {
	sync.Mutex
	c *http.Client
}{c: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}}

// metrics scrapes /metrics: each sample by its full name with labels, and
// each metric name summed over its labels. With keys set, /metrics wants
// one too (issue 30); an answer other than 200 is an error, never an empty
// scrape that would read as a baseline of zeros.
func (s *server) metrics() (map[string]float64, error) {
	scrapes.Lock()
	defer scrapes.Unlock()
	req, _ := http.NewRequest("GET", s.url+"/metrics", nil)
	if len(soakKeys) > 0 {
		authHeader(req.Header, soakKeys[0])
	}
	resp, err := scrapes.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
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
		key := line[:i]
		out[key] = v
		if j := strings.IndexByte(key, '{'); j >= 0 {
			out[key[:j]] += v
		}
	}
	return out, sc.Err()
}

// procRSS is the process's resident set in bytes (/proc/PID/status VmRSS).
func procRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procFDs counts the process's open file descriptors.
func procFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// tailBuffer keeps the last max bytes written (a server's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

var _ io.Writer = (*tailBuffer)(nil)

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// nginxBinary finds nginx at $SLUICE_TEST_NGINX, where deploy/fetch-nginx.sh
// unpacks it, or in PATH.
func nginxBinary() string {
	if p := os.Getenv("SLUICE_TEST_NGINX"); p != "" {
		return p
	}
	if p := filepath.Join("..", "..", ".build", "nginx", "usr", "sbin", "nginx"); fileExists(p) {
		return p
	}
	p, _ := exec.LookPath("nginx")
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestThroughNginx runs deploy/nginx.conf in front of the server and checks
// that tokens arrive through it while the sequence is still generating
// (a buffering proxy would hold them until the end) and that resume works
// through it. Skipped when there is no nginx (deploy/fetch-nginx.sh unpacks
// Debian's into .build/nginx).
func TestThroughNginx(t *testing.T) {
	r := getRig(t)
	bin := nginxBinary()
	if bin == "" {
		t.Skip("no nginx: run deploy/fetch-nginx.sh")
	}
	url := startNginx(t, bin, strings.TrimPrefix(r.url, "http://"))
	r.waitIdle(t, 5*time.Second)

	body := `{"messages":[{"role":"user","content":"Write a story about a dragon."}],"max_tokens":64,"temperature":0,"stream":true}`
	before := r.stats().GenTokens
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/chat/completions", strings.NewReader(body))
	// Asked explicitly, so Go's transport neither adds nor hides compression.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("through nginx: %s %v", resp.Status, resp.Header)
	}
	// Each piece must reach the client about when the engine produced it:
	// lag is how many tokens the engine had generated beyond the pieces the
	// client holds. A buffering proxy (or nginx's postpone_output) lets
	// several pile up. The smallest lag of the first 5 pieces tolerates one
	// slow read on a busy machine.
	br := bufio.NewReader(resp.Body)
	ssetest.Read(t, br, 1) // role
	minLag := int64(1 << 30)
	for i := int64(1); i <= 5; i++ {
		if p := decode(t, ssetest.Read(t, br, 1)); len(p.pieces) != 1 {
			t.Fatalf("event %d is not a piece of text: %+v", i, p)
		}
		minLag = min(minLag, r.stats().GenTokens-before-i)
	}
	if st := r.stats(); minLag > 2 || st.Running != 1 {
		t.Fatalf("through nginx the client trails the engine by %d tokens (running %d): the proxy buffers", minLag, st.Running)
	}
	t.Logf("through nginx the client trails the engine by %d token(s)", minLag)
	// Cut here and resume through nginx: the headers pass through.
	id := resp.Header.Get("X-Sluice-Stream-Id")
	resp.Body.Close()
	r.waitIdle(t, 2*time.Second)
	again, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/v1/streams/"+id, nil)
	again.Header.Set("Last-Event-ID", "6")
	resp2, err := http.DefaultClient.Do(again)
	if err != nil || resp2.StatusCode != 200 {
		t.Fatalf("resume through nginx: %v %v", err, resp2.Status)
	}
	defer resp2.Body.Close()
	rest := ssetest.Read(t, bufio.NewReader(resp2.Body), 0)
	if len(rest) == 0 || rest[0].ID != 7 || rest[len(rest)-1].Data != "[DONE]" {
		t.Errorf("resumed events through nginx: %+v", rest)
	}
	r.waitIdle(t, 5*time.Second)
}

// startNginx runs deploy/nginx.conf's server block, pointed at upstream and
// listening on a free loopback port, in a scratch prefix.
func startNginx(t *testing.T, bin, upstream string) string {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	block := strings.Replace(string(conf), "server 127.0.0.1:8080;", "server "+upstream+";", 1)
	block = strings.Replace(block, "listen 80;", "listen "+addr+";", 1)
	dir := t.TempDir()
	main := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, block)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path)
	cmd.Stderr = os.Stderr
	// nginx forks workers; killing only the master would orphan them, still
	// listening. Its own process group lets cleanup end all of them at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for { // nginx gives no readiness signal but its port
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

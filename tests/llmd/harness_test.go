package llmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// servedName is the chart's model.name: the model requests name, the
// token producer's model and the KV-event topic's model.
const servedName = "smollm2"

// bins are the programs make llmd-check built.
type bins struct{ epp, envoy, sluice, pickerconfig, model, logs string }

func binsFromEnv(t *testing.T) bins {
	b := bins{
		epp:          os.Getenv("SLUICE_LLMD_EPP"),
		envoy:        os.Getenv("SLUICE_LLMD_ENVOY"),
		sluice:       os.Getenv("SLUICE_LLMD_SLUICE"),
		pickerconfig: os.Getenv("SLUICE_LLMD_PICKERCONFIG"),
		model:        os.Getenv("SLUICE_LLMD_MODEL"),
		logs:         os.Getenv("SLUICE_LLMD_LOGS"),
	}
	if b.epp == "" {
		t.Skip("SLUICE_LLMD_EPP unset: make llmd-check builds llm-d's router and runs this test")
	}
	for name, p := range map[string]string{"SLUICE_LLMD_ENVOY": b.envoy, "SLUICE_LLMD_SLUICE": b.sluice,
		"SLUICE_LLMD_PICKERCONFIG": b.pickerconfig, "SLUICE_LLMD_MODEL": b.model} {
		if p == "" {
			t.Fatalf("%s unset", name)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if b.logs == "" {
		b.logs = t.TempDir()
	}
	if err := os.MkdirAll(b.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// proc is a child process whose output goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string
	started time.Time
	done    chan struct{}
}

func start(t *testing.T, logs, name string, env []string, argv ...string) *proc {
	t.Helper()
	logPath := filepath.Join(logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, started: time.Now(), done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop(5 * time.Second) })
	return p
}

// stop sends SIGTERM and, after grace, SIGKILL.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's log, for a failure message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// ports holds what the two replicas share (one port per role, on their two
// addresses) and the picker's and Envoy's own.
type ports struct {
	http, kv, replay             int
	grpc, health, metrics, envoy int
	admin                        int
}

// freePorts finds ports free on both 127.0.0.1 and 127.0.0.2 (the
// replicas'), below the kernel's ephemeral range (32768 up on Linux). A
// port the kernel handed out for :0 is in that range, and every outgoing
// connection of the replicas, Envoy and the tests takes its source port
// from it too: once in CI one of them took the picker's health port between
// here and the picker's start, which then exited. Another process can
// still take one; the start then fails visibly.
func freePorts(t *testing.T) ports {
	t.Helper()
	var got []int
	seen := map[int]bool{}
	for tries := 0; len(got) < 8; tries++ {
		if tries > 10000 {
			t.Fatal("no free ports in 20000-32767")
		}
		port := 20000 + rand.IntN(12768)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
		l.Close()
		if err != nil || seen[port] {
			continue
		}
		l2.Close()
		seen[port] = true
		got = append(got, port)
	}
	return ports{http: got[0], kv: got[1], replay: got[2], grpc: got[3], health: got[4], metrics: got[5], envoy: got[6], admin: got[7]}
}

// replica is one sluice serve.
type replica struct {
	ip   string
	base string // http://ip:port
	p    *proc
}

func (r *replica) hostPort() string { return strings.TrimPrefix(r.base, "http://") }

// startReplica runs sluice serve with the flags the chart gives a pod
// (--metrics-compat vllm, the served name, KV events on the pod's IP with
// the address topic and the replay socket), one thread, --max-seqs 4 so
// that a handful of streams fills its queue to the picker's threshold, and
// a replay buffer of 16 batches, which the test's traffic fills several
// times: each time the publisher starts its sequence over with the whole
// state (kvevents/reset.go), under llm-d's own indexer. extra are more
// flags (the chart's drain flags).
func startReplica(t *testing.T, b bins, ip string, pt ports, extra ...string) *replica {
	t.Helper()
	addr := fmt.Sprintf("%s:%d", ip, pt.http)
	argv := []string{b.sluice, "serve", "--model", b.model, "--addr", addr, "--threads", "1",
		"--served-model-name", servedName, "--metrics-compat", "vllm",
		"--max-seqs", "4", "--kv-blocks", "2048", "--web=false",
		"--kv-events-endpoint", fmt.Sprintf("tcp://%s:%d", ip, pt.kv),
		"--kv-events-topic-pod", "address",
		"--kv-events-replay-endpoint", fmt.Sprintf("tcp://%s:%d", ip, pt.replay),
		"--kv-events-buffer-steps", "16"}
	p := start(t, b.logs, "sluice-"+ip, []string{"POD_IP=" + ip}, append(argv, extra...)...)
	return &replica{ip: ip, base: "http://" + addr, p: p}
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, p *proc, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("%s exited:\n%s", p.name, p.tail())
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s within %v:\n%s", p.name, url, within, p.tail())
}

// pickerConfig is the chart's rendered EndpointPickerConfig for these
// values (pickerconfig runs the chart's own templates), as JSON.
func pickerConfig(t *testing.T, b bins, prefix string, pt ports, tokenizer string) map[string]any {
	t.Helper()
	set, _ := json.Marshal(map[string]any{
		"model":    map[string]any{"name": servedName},
		"kvEvents": map[string]any{"port": pt.kv, "replayPort": pt.replay},
		// Two replicas, the picker, Envoy and the test share two cores with
		// whatever else the machine runs: a scrape can come 200 ms late
		// (llm-d's staleness bound), and the picker then skips an idle
		// replica as saturated. The chart's value, widened.
		"picker": map[string]any{"prefixScoring": prefix, "tokenizerUrl": tokenizer, "metricsStalenessThreshold": "1s"},
	})
	return renderPicker(t, b, "values-cpu.yaml", string(set))
}

// renderPicker is pickerconfig for value files (relative to the chart) and
// values over them (JSON).
func renderPicker(t *testing.T, b bins, files, set string) map[string]any {
	t.Helper()
	chart, err := filepath.Abs("../../deploy/k8s/chart/sluice")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(b.pickerconfig, "-chart", chart, "-f", files, "-set", set, "-json")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pickerconfig: %v\n%s", err, stderr.String())
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("pickerconfig printed no JSON: %v", err)
	}
	return cfg
}

// withFileDiscovery adds what takes Kubernetes' place on this machine: the
// file-discovery plugin reading endpoints, named as dataLayer.discovery;
// with watch it rereads the file on every change (the rolling restart's
// kubelet rewrites it as replicas turn ready and unready).
func withFileDiscovery(cfg map[string]any, endpoints string, watch bool) map[string]any {
	cfg["plugins"] = append(cfg["plugins"].([]any), map[string]any{
		"name": "file-discovery", "type": "file-discovery",
		"parameters": map[string]any{"path": endpoints, "watchFile": watch},
	})
	dl, _ := cfg["dataLayer"].(map[string]any)
	if dl == nil {
		dl = map[string]any{}
		cfg["dataLayer"] = dl
	}
	dl["discovery"] = map[string]any{"pluginRef": "file-discovery"}
	return cfg
}

// randomPlacement is the baseline: the same config with the scheduling
// profile reduced to llm-d's random picker.
func randomPlacement(cfg map[string]any) map[string]any {
	cfg["plugins"] = append(cfg["plugins"].([]any), map[string]any{"name": "random-picker", "type": "random-picker"})
	cfg["schedulingProfiles"] = []any{map[string]any{"name": "default",
		"plugins": []any{map[string]any{"pluginRef": "random-picker"}}}}
	return cfg
}

// withoutReplay drops the precise producer's replaySocketPort: the control
// for the picker-restart measurement.
func withoutReplay(t *testing.T, cfg map[string]any) map[string]any {
	for _, p := range cfg["plugins"].([]any) {
		pm := p.(map[string]any)
		if pm["type"] != "precise-prefix-cache-producer" {
			continue
		}
		pd := pm["parameters"].(map[string]any)["kvEventsConfig"].(map[string]any)["podDiscoveryConfig"].(map[string]any)
		if _, ok := pd["replaySocketPort"]; !ok {
			t.Fatal("the chart's precise config has no replaySocketPort")
		}
		delete(pd, "replaySocketPort")
		return cfg
	}
	t.Fatal("no precise-prefix-cache-producer in the config")
	return nil
}

// router is the picker and Envoy in front of the replicas.
type router struct {
	epp, envoy *proc
	base       string // Envoy's listener
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startEPP runs the picker with cfg (JSON is YAML to its loader) and the
// two replicas as its endpoints file, watched for changes with watch.
func startEPP(t *testing.T, b bins, name string, cfg map[string]any, pt ports, reps []*replica, watch bool) *proc {
	t.Helper()
	var eps []any
	for i, r := range reps {
		eps = append(eps, map[string]any{"name": fmt.Sprintf("sluice-%d", i), "address": r.ip, "port": strconv.Itoa(pt.http)})
	}
	epFile := filepath.Join(b.logs, "endpoints.json")
	writeJSON(t, epFile, map[string]any{"endpoints": eps})
	cfgFile := filepath.Join(b.logs, "epp-"+name+".json")
	writeJSON(t, cfgFile, withFileDiscovery(cfg, epFile, watch))
	p := start(t, b.logs, "epp", nil, b.epp, "--pool-name", "local", "--pool-namespace", "local",
		"--config-file", cfgFile, "--grpc-port", strconv.Itoa(pt.grpc), "--grpc-health-port", strconv.Itoa(pt.health),
		"--metrics-port", strconv.Itoa(pt.metrics), "--metrics-endpoint-auth=false",
		"--secure-serving=false", "--tracing=false", "--v="+cmp.Or(os.Getenv("SLUICE_LLMD_EPP_V"), "2"))
	// The gRPC port opens once file discovery has loaded the endpoints.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.exited() {
			t.Fatalf("the picker exited:\n%s", p.tail())
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", pt.grpc), time.Second)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the picker's ext_proc port never opened:\n%s", p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// envoyConfig is llm-d-router's docs/discovery.md setup: ext_proc to the
// picker with full-duplex streamed bodies, an ORIGINAL_DST cluster on
// x-gateway-destination-endpoint; and a response header naming the
// replica that answered, which the test reads.
func envoyConfig(pt ports) string {
	return fmt.Sprintf(`admin:
  address: {socket_address: {address: 127.0.0.1, port_value: %d}}
static_resources:
  listeners:
  - name: inference
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          route_config:
            name: inference
            virtual_hosts:
            - name: inference
              domains: ["*"]
              response_headers_to_add:
              - header: {key: x-sluice-upstream, value: "%%UPSTREAM_HOST%%"}
              routes:
              - match: {prefix: "/"}
                route: {cluster: original_destination_cluster, timeout: 600s, idle_timeout: 600s}
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc: {cluster_name: epp, authority: "localhost:%d"}
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 600s
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: epp
    type: STATIC
    connect_timeout: 5s
    lb_policy: LEAST_REQUEST
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: epp
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 5s
    lb_policy: CLUSTER_PROVIDED
    circuit_breakers:
      thresholds: [{max_connections: 10000, max_pending_requests: 10000, max_requests: 10000}]
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
`, pt.admin, pt.envoy, pt.grpc, pt.grpc)
}

func startEnvoy(t *testing.T, b bins, pt ports) *proc {
	t.Helper()
	cfg := filepath.Join(b.logs, "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(envoyConfig(pt)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, b.logs, "envoy", nil, b.envoy, "-c", cfg, "--log-level", "warn",
		"--concurrency", "1", "--disable-hot-restart")
	waitReady(t, p, fmt.Sprintf("http://127.0.0.1:%d/ready", pt.admin), 60*time.Second)
	return p
}

// waitRouted sends requests through Envoy until one comes back 200 from a
// replica, and then until the picker has scraped both replicas' metrics.
func waitRouted(t *testing.T, base string, rt *router) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := chat(ctx, base, []msg{{"user", "ping"}}, 1)
		cancel()
		if err == nil && res.upstream != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing routed through Envoy and the picker: %v\npicker:\n%s\nenvoy:\n%s", err, rt.epp.tail(), rt.envoy.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}

// eppMetrics scrapes the picker's own /metrics.
func eppMetrics(t *testing.T, pt ports) map[string]float64 {
	t.Helper()
	m, err := metrics(fmt.Sprintf("http://127.0.0.1:%d", pt.metrics))
	if err != nil {
		t.Fatalf("the picker's metrics: %v", err)
	}
	return m
}

// subscribers is the picker's count of KV-event subscriptions it manages
// (llm-d-router's kv_cache_events_active_subscribers).
func subscribers(t *testing.T, pt ports) float64 {
	t.Helper()
	v, _ := metric(eppMetrics(t, pt), "llm_d_epp_kv_cache_events_active_subscribers")
	return v
}

// sinceStart is the picker's log since its latest start.
func (p *proc) sinceStart() string {
	b, _ := os.ReadFile(p.log)
	s := string(b)
	if i := strings.LastIndex(s, "\n=== "); i >= 0 {
		s = s[i:]
	}
	return s
}

// waitReplayed waits until the picker has replayed n replicas' kept
// batches (llm-d-router logs "Replay complete" per subscription).
func waitReplayed(t *testing.T, p *proc, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(p.sinceStart(), `"msg":"Replay complete"`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the picker replayed fewer than %d replicas' events within 20 s:\n%s", n, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// objects splits a rendering into its objects, by kind/name.
func objects(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if o == nil {
			continue
		}
		out[fmt.Sprintf("%v/%v", o["kind"], at(o, "metadata", "name"))] = o
	}
	return out
}

// at walks maps by key and lists by index (an int).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// serveFlags are the flag names cmd/sluice defines, read from its source.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../../../cmd/sluice/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/sluice sources: %v", err)
	}
	re := regexp.MustCompile(`fs\.(?:String|Int|Int64|Bool|Duration|Float64)(?:Var)?\((?:&[^,]+,\s*)?"([a-z0-9-]+)"`)
	flags := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			flags[string(m[1])] = true
		}
	}
	return flags
}

// TestWiring checks what kubeconform cannot: that the objects agree with
// each other and with Sluice itself. Every flag the chart passes exists,
// the pool selects the replicas on their HTTP port and asks the picker's
// Service, the HPA asks for the metric the adapter rule serves, Sluice
// exports the series behind it, the picker saturates a pod at queue 5 or KV
// 0.8, and the grace period outlasts preStop plus the drain.
func TestWiring(t *testing.T) {
	flags := serveFlags(t)
	metricsSrc := metricNames(t)
	for _, vr := range variants {
		t.Run(vr.name, func(t *testing.T) {
			objs := objects(t, render(t, vr.values))
			dep := objs["Deployment/sluice"]
			pod := at(dep, "spec", "template")
			c := at(pod, "spec", "containers", 0)
			args := at(c, "args").([]any)
			var shutdown time.Duration
			for i, a := range args[1:] {
				s := a.(string)
				if !strings.HasPrefix(s, "--") {
					continue
				}
				if !flags[strings.TrimPrefix(s, "--")] {
					t.Errorf("sluice serve has no flag %s", s)
				}
				if s == "--shutdown-timeout" {
					shutdown, _ = time.ParseDuration(args[i+2].(string))
				}
			}
			grace := at(pod, "spec", "terminationGracePeriodSeconds").(float64)
			preStop := at(c, "lifecycle", "preStop", "sleep", "seconds").(float64)
			if shutdown == 0 || grace <= preStop+shutdown.Seconds()+10 {
				t.Errorf("grace %vs, preStop %vs, shutdown %v: SIGKILL could cut the drain", grace, preStop, shutdown)
			}
			if at(c, "livenessProbe", "httpGet", "path") != "/health" || at(c, "readinessProbe", "httpGet", "path") != "/ready" {
				t.Error("probes: liveness /health, readiness /ready")
			}
			// One missed readiness probe drops the pod from the picker's
			// endpoints and its blocks from the precise index.
			if ft := at(c, "readinessProbe", "failureThreshold"); ft == nil || ft.(float64) < 3 {
				t.Errorf("readiness failureThreshold %v, want at least 3", ft)
			}
			httpPort := at(c, "ports", 0, "containerPort")

			pool := objs["InferencePool/sluice"]
			if !reflect.DeepEqual(at(pool, "spec", "selector", "matchLabels"), at(pod, "metadata", "labels")) {
				t.Errorf("pool selects %v, pods carry %v", at(pool, "spec", "selector", "matchLabels"), at(pod, "metadata", "labels"))
			}
			if at(pool, "spec", "targetPorts", 0, "number") != httpPort {
				t.Errorf("pool targets %v, Sluice listens on %v", at(pool, "spec", "targetPorts", 0, "number"), httpPort)
			}
			epp := objs[fmt.Sprintf("Service/%v", at(pool, "spec", "endpointPickerRef", "name"))]
			if epp == nil || at(epp, "spec", "ports", 0, "port") != at(pool, "spec", "endpointPickerRef", "port", "number") {
				t.Errorf("the pool's picker %v is not a Service on that port", at(pool, "spec", "endpointPickerRef"))
			}
			route := objs["HTTPRoute/sluice"]
			if at(route, "spec", "rules", 0, "backendRefs", 0, "name") != "sluice" ||
				at(route, "spec", "rules", 0, "matches", 0, "headers", 0, "value") != servedName(args) {
				t.Error("the route does not send this model's requests to this pool")
			}

			checkPicker(t, objs["ConfigMap/sluice-epp"], pod, c)
			checkPickerHA(t, objs)
			if pm, ok := objs["PodMonitor/sluice"]; ok {
				ep := at(pm, "spec", "podMetricsEndpoints", 0)
				if !reflect.DeepEqual(at(pm, "spec", "selector", "matchLabels"), at(pod, "metadata", "labels")) ||
					containerPorts(c)[at(ep, "port")] == nil || at(ep, "path") != "/metrics" {
					t.Errorf("the PodMonitor does not scrape the pods' /metrics: %v", at(pm, "spec"))
				}
			}
			checkAutoscaling(t, objs, metricsSrc)
		})
	}
}

// metricNames is server/metrics' source, where Sluice's families are named.
func metricNames(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob("../../../server/metrics/*.go")
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	return src.String()
}

func servedName(args []any) any {
	for i, a := range args {
		if a == "--served-model-name" {
			return args[i+1]
		}
	}
	return nil
}

func checkPicker(t *testing.T, cm map[string]any, pod, c any) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(at(cm, "data", "config.yaml").(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	plugins := map[string]any{}
	for _, p := range at(cfg, "plugins").([]any) {
		plugins[at(p, "type").(string)] = at(p, "parameters")
	}
	if d := plugins["utilization-detector"]; at(d, "queueDepthThreshold") != 5.0 || at(d, "kvCacheUtilThreshold") != 0.8 {
		t.Errorf("saturation thresholds %v, want queue 5, KV 0.8", d)
	}
	if _, ok := plugins["core-metrics-extractor"]; !ok {
		t.Error("no core-metrics-extractor: the picker would read no vLLM metrics")
	}
	precise, ok := plugins["precise-prefix-cache-producer"]
	if !ok {
		return
	}
	// The indexer dials every endpoint of the pool on the KV-event port and
	// asks the replay port for what it missed.
	kv := at(precise, "kvEventsConfig")
	ports := containerPorts(c) // name -> port as a string
	port, replay := ports["kv-events"], ports["kv-replay"]
	str := func(v any) any {
		if f, ok := v.(float64); ok {
			return strconv.Itoa(int(f))
		}
		return v
	}
	if port == nil || str(at(kv, "podDiscoveryConfig", "socketPort")) != port || at(kv, "topicFilter") != "kv@" ||
		at(kv, "discoverPods") != true {
		t.Errorf("kvEventsConfig %v; the pods publish on %v", kv, port)
	}
	if replay == nil || str(at(kv, "podDiscoveryConfig", "replaySocketPort")) != replay {
		t.Errorf("replaySocketPort %v; the pods replay on %v", at(kv, "podDiscoveryConfig", "replaySocketPort"), replay)
	}
	// llm-d-router v0.10.0 no longer reads podLabelSelector (the pool's
	// endpoints are the pods): a selector here would only mislead.
	if sel := at(kv, "podDiscoveryConfig", "podLabelSelector"); sel != nil {
		t.Errorf("podLabelSelector %v is not read by the picker", sel)
	}
	// The producer subscribes to a pod only when an endpoint-notification
	// source hands it the pool's endpoints; with no such wiring its index
	// stays empty and every pod scores 0.
	if _, ok := plugins["endpoint-notification-source"]; !ok {
		t.Error("no endpoint-notification-source: the precise producer would subscribe to no pod")
	}
	if !hasSource(cfg, "endpoint-notification-source", "precise-prefix-cache-producer") {
		t.Errorf("dataLayer.sources %v does not feed endpoints to precise-prefix-cache-producer", at(cfg, "dataLayer"))
	}
	if !hasSource(cfg, "metrics-data-source", "core-metrics-extractor") {
		t.Errorf("dataLayer.sources %v lost the metrics scrape", at(cfg, "dataLayer"))
	}
	// The token producer renders through a vLLM-compatible endpoint for the
	// served model.
	args := at(c, "args").([]any)
	if tp := plugins["token-producer"]; at(tp, "modelName") != servedName(args) || at(tp, "vllm", "url") == nil {
		t.Errorf("token-producer %v; the pods serve %v", tp, servedName(args))
	}
	// The topic names the pod by the address the indexer keys blocks by.
	if v := flagValue(args, "--kv-events-topic-pod"); v != "address" {
		t.Errorf("--kv-events-topic-pod %v, want address", v)
	}
	if v := flagValue(args, "--kv-events-replay-endpoint"); v != fmt.Sprintf("tcp://$(POD_IP):%v", replay) {
		t.Errorf("--kv-events-replay-endpoint %v, want the pod's IP on port %v", v, replay)
	}
}

// hasSource reports whether the picker config's dataLayer feeds source's
// output to extractor.
func hasSource(cfg map[string]any, source, extractor string) bool {
	srcs, _ := at(cfg, "dataLayer", "sources").([]any)
	for _, s := range srcs {
		if at(s, "pluginRef") != source {
			continue
		}
		exs, _ := at(s, "extractors").([]any)
		for _, e := range exs {
			if at(e, "pluginRef") == extractor {
				return true
			}
		}
	}
	return false
}

func checkAutoscaling(t *testing.T, objs map[string]map[string]any, metricsSrc string) {
	t.Helper()
	hpa, ok := objs["HorizontalPodAutoscaler/sluice"]
	if !ok {
		return
	}
	var rules map[string]any
	if err := yaml.Unmarshal([]byte(at(objs["ConfigMap/sluice-prometheus-adapter"], "data", "config.yaml").(string)), &rules); err != nil {
		t.Fatal(err)
	}
	rule := at(rules, "rules", 0)
	if want := at(hpa, "spec", "metrics", 0, "pods", "metric", "name"); at(rule, "name", "as") != want {
		t.Errorf("the HPA asks for %v, the adapter serves %v", want, at(rule, "name", "as"))
	}
	series, _, _ := strings.Cut(at(rule, "seriesQuery").(string), "{")
	if !strings.Contains(metricsSrc, `"`+series+`"`) {
		t.Errorf("Sluice exports no %s", series)
	}
}

// checkPickerHA: more than one picker replica means leader election (the
// flag, the lease rules, the probes' services) and a PodDisruptionBudget
// over the pickers; and the Role lets the picker watch what its
// reconcilers watch.
func checkPickerHA(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	dep := objs["Deployment/sluice-epp"]
	c := at(dep, "spec", "template", "spec", "containers", 0)
	rules := fmt.Sprint(at(objs["Role/sluice-epp"], "rules"))
	for _, r := range []string{"inferenceobjectives", "inferencemodelrewrites", "inference.networking.x-k8s.io"} {
		if !strings.Contains(rules, r) {
			t.Errorf("the picker's Role lacks %s: %s", r, rules)
		}
	}
	if n := at(dep, "spec", "replicas").(float64); n < 2 {
		t.Errorf("%v picker replica(s): one lost pod fails every request closed", n)
	}
	args := fmt.Sprint(at(c, "args"))
	if !strings.Contains(args, "--ha-enable-leader-election") || !strings.Contains(rules, "leases") {
		t.Errorf("several pickers without leader election (args %s, rules %s)", args, rules)
	}
	if at(c, "readinessProbe", "grpc", "service") != "readiness" || at(c, "livenessProbe", "grpc", "service") != "liveness" {
		t.Error("with leader election the probes must ask the readiness and liveness services")
	}
	pdb := objs["PodDisruptionBudget/sluice-epp"]
	if pdb == nil || !reflect.DeepEqual(at(pdb, "spec", "selector", "matchLabels"), at(dep, "spec", "selector", "matchLabels")) {
		t.Errorf("no PodDisruptionBudget over the pickers: %v", pdb)
	}
}

// TestPreciseTokenizer: precise scoring renders prompts through the
// release's own Service unless told otherwise, and refuses to do so when
// the pods want an API key, which the picker's render calls never carry.
func TestPreciseTokenizer(t *testing.T) {
	precise := map[string]any{"prefixScoring": "precise"}
	out, err := renderWith("values-cpu.yaml", map[string]any{"picker": precise})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "url: http://sluice.sluice.svc:8080\n") {
		t.Error("the token producer does not default to the release's Service")
	}
	keys := map[string]any{"create": true, "keys": []any{"k1"}}
	if _, err := renderWith("values-cpu.yaml", map[string]any{"picker": precise, "apiKey": keys}); err == nil {
		t.Error("precise with API keys and the pods as tokenizer: rendered")
	}
	withURL := map[string]any{"prefixScoring": "precise", "tokenizerUrl": "http://tok:8000"}
	if _, err := renderWith("values-cpu.yaml", map[string]any{"picker": withURL, "apiKey": keys}); err != nil {
		t.Errorf("precise with API keys and a tokenizer of its own: %v", err)
	}
	// apiKey.renderPublic opens the pods' render routes to the picker
	// (serve --render-public), and only with keys is the flag needed.
	open := map[string]any{"create": true, "keys": []any{"k1"}, "renderPublic": true}
	out, err = renderWith("values-cpu.yaml", map[string]any{"picker": precise, "apiKey": open})
	if err != nil {
		t.Fatalf("precise with API keys and renderPublic: %v", err)
	}
	args := at(objects(t, out)["Deployment/sluice"], "spec", "template", "spec", "containers", 0, "args").([]any)
	if !slices.Contains(args, any("--render-public")) || !slices.Contains(args, any("--api-key-file")) {
		t.Errorf("apiKey.renderPublic with keys: serve args %v lack --render-public or --api-key-file", args)
	}
	out, err = renderWith("values-cpu.yaml", map[string]any{"picker": precise, "apiKey": map[string]any{"renderPublic": true}})
	if err != nil {
		t.Fatal(err)
	}
	if args := at(objects(t, out)["Deployment/sluice"], "spec", "template", "spec", "containers", 0, "args").([]any); slices.Contains(args, any("--render-public")) {
		t.Errorf("no keys, yet --render-public: %v", args)
	}
}

// TestModelClaimFillable: the claim the chart creates starts empty, so it
// must allow a writer; one the user made and filled may be read-only.
func TestModelClaimFillable(t *testing.T) {
	objs := objects(t, render(t, ""))
	if m := at(objs["PersistentVolumeClaim/sluice-models"], "spec", "accessModes", 0); m == "ReadOnlyMany" || m == nil {
		t.Errorf("the chart's model claim is %v: nothing can fill it", m)
	}
	ro := map[string]any{"model": map[string]any{"pvc": map[string]any{"accessMode": "ReadOnlyMany"}}}
	if _, err := renderWith("", ro); err == nil {
		t.Error("a ReadOnlyMany claim of the chart's own: rendered")
	}
	ro["model"].(map[string]any)["pvc"].(map[string]any)["claimName"] = "filled-models"
	if _, err := renderWith("", ro); err != nil {
		t.Errorf("an existing claim: %v", err)
	}
}

package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
	// The indexer dials every pod the selector finds, on the KV-event port.
	kv := at(precise, "kvEventsConfig")
	var port any
	for _, p := range at(c, "ports").([]any) {
		if at(p, "name") == "kv-events" {
			port = at(p, "containerPort")
		}
	}
	if port == nil || at(kv, "podDiscoveryConfig", "socketPort") != port || at(kv, "topicFilter") != "kv@" {
		t.Errorf("kvEventsConfig %v; the pods publish on %v", kv, port)
	}
	for _, sel := range strings.Split(at(kv, "podDiscoveryConfig", "podLabelSelector").(string), ",") {
		k, v, _ := strings.Cut(sel, "=")
		if at(pod, "metadata", "labels", k) != v {
			t.Errorf("pod selector %s does not match the pods", sel)
		}
	}
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

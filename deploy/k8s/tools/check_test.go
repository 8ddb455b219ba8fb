package tools

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
)

var update = flag.Bool("update", false, "rewrite deploy/k8s/manifests and deploy/k8s/schemas")

const (
	chartDir     = "../chart/sluice"
	manifestsDir = "../manifests"
	schemasDir   = "../schemas"
)

// variants are the value sets CI renders; each has a committed rendering.
var variants = []struct{ name, values string }{
	{"gpu", ""},
	{"cpu", "values-cpu.yaml"},
	{"cpu-init-precise", "values-cpu.yaml,../../tools/testdata/init-precise.yaml"},
}

// render is `helm template sluice deploy/k8s/chart/sluice -n sluice -f ...`
// for the Kubernetes version the schemas describe, done as Helm's install
// action does it client-only (action.renderResources: values, engine, install
// order, "# Source:" headers) but without importing pkg/action, whose
// cluster client, registry and storage drivers would more than double this
// module's build.
func render(t *testing.T, valueFiles string) string {
	t.Helper()
	out, err := renderWith(valueFiles, nil)
	if err != nil {
		t.Fatalf("render %s: %v", valueFiles, err)
	}
	return out
}

// renderWith is render with the values in extra (like --set) over the
// files', and the chart's own failures (a fail in a template) returned.
func renderWith(valueFiles string, extra map[string]any) (string, error) {
	return Render(chartDir, valueFiles, extra)
}

// TestChartRendersValid renders each variant, compares it with its
// committed rendering (the plain manifests) and has kubeconform accept every
// object, strictly, against the vendored schemas only: a kind without a
// schema, an unknown field or a wrong type fails.
func TestChartRendersValid(t *testing.T) {
	v, err := validator.New([]string{filepath.Join(schemasDir, SchemaTemplate)}, validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, vr := range variants {
		t.Run(vr.name, func(t *testing.T) {
			got := render(t, vr.values)
			golden := filepath.Join(manifestsDir, vr.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the chart's rendering; go test ./... -update in deploy/k8s/tools rewrites it", golden)
			}
			kinds := map[string]int{}
			for _, r := range v.Validate(golden, io.NopCloser(strings.NewReader(got))) {
				sig, _ := r.Resource.Signature()
				name := fmt.Sprintf("%s/%s", sig.Kind, sig.Name)
				switch r.Status {
				case validator.Valid:
					kinds[sig.Kind]++
				case validator.Empty:
				default:
					t.Errorf("%s: status %d: %v %v", name, r.Status, r.Err, r.ValidationErrors)
				}
			}
			for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "InferencePool", "ConfigMap", "NetworkPolicy"} {
				if kinds[k] == 0 {
					t.Errorf("no valid %s rendered: %v", k, kinds)
				}
			}
		})
	}
}

// TestValidatorRejects keeps the validation honest: a misspelt field, a
// wrong type and a kind with no vendored schema all fail.
func TestValidatorRejects(t *testing.T) {
	v, err := validator.New([]string{filepath.Join(schemasDir, SchemaTemplate)}, validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n",
		"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {minAvailable: [1]}\n",
		"apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: x}\nspec: {selector: {matchLabels: {a: b}}, targetPorts: [{number: 8080}], endpointPickerRef: {name: e, port: {number: 9002}, failureMode: Sometimes}}\n",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\n",
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: x}\nspec: {podSelector: {}, ingress: [{form: []}]}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: x}\nstringData: {keys: [a]}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec: {selector: {}, podMetricsEndpoints: [{port: http, pth: /metrics}]}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec: {selector: {}, podMetricsEndpoints: [{port: 8080}]}\n",
	} {
		for _, r := range v.Validate("doc", io.NopCloser(strings.NewReader(doc))) {
			if r.Status == validator.Valid {
				t.Errorf("accepted:\n%s", doc)
			}
		}
	}
}

// TestSchemasUpToDate regenerates the vendored schemas from the pinned
// modules (the module cache; nothing is fetched) and compares.
func TestSchemasUpToDate(t *testing.T) {
	dir := t.TempDir()
	if *update {
		dir = schemasDir
	}
	err := GenerateSchemas(dir)
	if errors.Is(err, errNotCached) {
		t.Skipf("%v (make k8s-check downloads them)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadDir(schemasDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(committed) {
		t.Errorf("%d schemas generated, %d vendored", len(entries), len(committed))
	}
	for _, e := range entries {
		got, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		want, err := os.ReadFile(filepath.Join(schemasDir, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v); go test ./... -update in deploy/k8s/tools rewrites it", e.Name(), err)
		}
	}
}

package tools

import (
	"encoding/base64"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
)

// sealSecretValue is 64 hex digits, as `openssl rand -hex 32` writes them.
const sealSecretValue = "3f9a1c0e7b2d4a6f8e1c3b5d7f9a2c4e6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a"

// TestSealKeyWiring: with reasoning.sealKey set (an operator's Secret or a
// value the chart turns into one), every replica gets --seal-key-file
// pointing into a read-only mount of that Secret's one item, so all of
// them, restarted or new, open each other's sealed reasoning; without it,
// neither flag, mount nor Secret. The pod stays hardened and every object
// passes kubeconform.
func TestSealKeyWiring(t *testing.T) {
	v, err := validator.New([]string{filepath.Join(schemasDir, SchemaTemplate)}, validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		values     string
		seal       map[string]any
		secret     string // the Secret the pods mount ("": none)
		item       string // its item holding the key
		chartMakes bool   // the chart renders that Secret
	}{
		{name: "gpu, unset", values: ""},
		{name: "cpu, unset", values: "values-cpu.yaml"},
		{name: "existing Secret", values: "values-cpu.yaml", seal: map[string]any{"existingSecret": "team-seal", "existingSecretKey": "seal.txt"},
			secret: "team-seal", item: "seal.txt"},
		{name: "existing Secret, default item", values: "values-cpu.yaml", seal: map[string]any{"existingSecret": "team-seal"},
			secret: "team-seal", item: "key"},
		{name: "value", values: "values-cpu.yaml", seal: map[string]any{"value": sealSecretValue},
			secret: "sluice-seal-key", item: "key", chartMakes: true},
		{name: "value, gpu", values: "", seal: map[string]any{"value": sealSecretValue},
			secret: "sluice-seal-key", item: "key", chartMakes: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var extra map[string]any
			if c.seal != nil {
				extra = map[string]any{"reasoning": map[string]any{"sealKey": c.seal}}
			}
			out, err := renderWith(c.values, extra)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range v.Validate(c.name, io.NopCloser(strings.NewReader(out))) {
				if r.Status != validator.Valid && r.Status != validator.Empty {
					sig, _ := r.Resource.Signature()
					t.Errorf("%s/%s: status %d: %v %v", sig.Kind, sig.Name, r.Status, r.Err, r.ValidationErrors)
				}
			}
			objs := objects(t, out)
			pod := at(objs["Deployment/sluice"], "spec", "template")
			checkPodHardened(t, pod)
			cont := at(pod, "spec", "containers", 0)
			args := at(cont, "args").([]any)
			file := flagValue(args, "--seal-key-file")
			var sealVols []any
			for _, vol := range at(pod, "spec", "volumes").([]any) {
				if at(vol, "secret", "secretName") == c.secret {
					sealVols = append(sealVols, vol)
				}
			}
			made := objs["Secret/sluice-seal-key"]
			if c.secret == "" {
				if file != nil || len(sealVols) != 0 || made != nil || at(pod, "metadata", "annotations", "checksum/seal-key") != nil {
					t.Errorf("no seal key set: --seal-key-file %v, volumes %v, Secret %v", file, sealVols, made)
				}
				return
			}
			path, ok := file.(string)
			if !ok || len(sealVols) != 1 {
				t.Fatalf("--seal-key-file %v, %d volumes of Secret %s: want the flag and one volume", file, len(sealVols), c.secret)
			}
			vol := sealVols[0]
			m := mountOf(cont, filepath.Dir(path))
			if m == nil || at(m, "name") != at(vol, "name") || at(m, "readOnly") != true {
				t.Errorf("--seal-key-file %s is not in the Secret's read-only mount (%v)", path, m)
			}
			items, _ := at(vol, "secret", "items").([]any)
			if len(items) != 1 || at(items[0], "key") != c.item || at(items[0], "path") != filepath.Base(path) {
				t.Errorf("volume items %v: want only %q at %s", items, c.item, filepath.Base(path))
			}
			if mode, _ := at(vol, "secret", "defaultMode").(float64); int(mode)&0o007 != 0 {
				t.Errorf("the seal key's mode %o lets every user of the pod read it", int(mode))
			}
			if !c.chartMakes {
				if made != nil || at(pod, "metadata", "annotations", "checksum/seal-key") != nil {
					t.Errorf("an existing Secret named, yet the chart makes one (%v) or restarts pods on its value", made)
				}
				return
			}
			raw, _ := at(made, "data", c.item).(string)
			if got, err := base64.StdEncoding.DecodeString(raw); err != nil || string(got) != sealSecretValue {
				t.Errorf("Secret %s item %s holds %q (%v), want the value", c.secret, c.item, got, err)
			}
			if at(pod, "metadata", "annotations", "checksum/seal-key") == nil {
				t.Error("no checksum/seal-key annotation: a changed key would not reach running pods")
			}
		})
	}
}

// TestChartRefusesBadSealKey: the chart fails rather than render pods that
// could not start (serve refuses a secret under 32 bytes) or whose key is
// ambiguous.
func TestChartRefusesBadSealKey(t *testing.T) {
	for name, seal := range map[string]map[string]any{
		"both sources":       {"existingSecret": "team-seal", "value": sealSecretValue},
		"short value":        {"value": "not-32-bytes"},
		"short once trimmed": {"value": "  short  " + strings.Repeat(" ", 40)},
		"existing, no item":  {"existingSecret": "team-seal", "existingSecretKey": ""},
		"value, 31 bytes":    {"value": sealSecretValue[:31]},
	} {
		_, err := renderWith("values-cpu.yaml", map[string]any{"reasoning": map[string]any{"sealKey": seal}})
		if err == nil || !strings.Contains(err.Error(), "reasoning.sealKey") {
			t.Errorf("%s: rendered (%v), want a reasoning.sealKey refusal", name, err)
		}
	}
	if _, err := renderWith("values-cpu.yaml", map[string]any{"reasoning": map[string]any{"sealKey": map[string]any{"value": sealSecretValue[:32]}}}); err != nil {
		t.Errorf("a 32-byte value: %v", err)
	}
}

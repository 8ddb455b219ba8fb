// Package tools renders and validates Sluice's Helm chart (deploy/k8s/chart)
// without a cluster: Helm's own template engine (helm.sh/helm/v3, pinned) and
// kubeconform (pinned) against JSON schemas vendored under deploy/k8s/schemas.
// It is a module of its own so that Helm's large dependency graph stays out of
// the server's go.mod.
package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// builtinKinds are the Kubernetes kinds the chart renders, as group/version
// (core: "") and kind.
var builtinKinds = []gvk{
	{"apps", "v1", "Deployment"},
	{"", "v1", "Service"},
	{"", "v1", "ServiceAccount"},
	{"", "v1", "ConfigMap"},
	{"", "v1", "Secret"},
	{"networking.k8s.io", "v1", "NetworkPolicy"},
	{"", "v1", "PersistentVolumeClaim"},
	{"policy", "v1", "PodDisruptionBudget"},
	{"autoscaling", "v2", "HorizontalPodAutoscaler"},
	{"rbac.authorization.k8s.io", "v1", "Role"},
	{"rbac.authorization.k8s.io", "v1", "RoleBinding"},
}

// crdSources are the CRDs, by module and path inside it, with the versions kept.
var crdSources = []struct{ module, path, version string }{
	{"sigs.k8s.io/gateway-api-inference-extension", "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml", "v1"},
	{"sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml", "v1"},
}

// smdModule holds the built-in types' schema: the structured-merge-diff
// description client-go's apply configurations are generated from, every
// field of every kind at that Kubernetes version (k8s.io/client-go v0.37.0:
// Kubernetes 1.37). It has field names and scalar types, not required fields
// or enums: unknown fields and wrong types fail, a missing field does not.
const smdModule, smdPath = "k8s.io/client-go", "applyconfigurations/internal/internal.go"

type gvk struct{ group, version, kind string }

// fileName is where kubeconform looks for a kind's schema under the template
// "{{ .ResourceKind }}{{ .KindSuffix }}.json": the kind lower-cased, then the
// group's first label (if any) and the version.
func (g gvk) fileName() string {
	suffix := "-" + g.version
	if g.group != "" {
		suffix = "-" + strings.Split(g.group, ".")[0] + suffix
	}
	return strings.ToLower(g.kind) + suffix + ".json"
}

// SchemaTemplate is the kubeconform schema location under the schema folder.
const SchemaTemplate = "{{ .ResourceKind }}{{ .KindSuffix }}.json"

// GenerateSchemas writes one self-contained strict JSON schema per kind into
// dir, from the pinned modules' own files (see modDir: no network when they
// are in the module cache).
func GenerateSchemas(dir string) error {
	types, err := readSMD()
	if err != nil {
		return err
	}
	out := map[string]any{}
	for _, k := range builtinKinds {
		name := k.smdName()
		if _, ok := types[name]; !ok {
			return fmt.Errorf("%s: no type %s", smdPath, name)
		}
		out[k.fileName()] = smdSchema(smdRef{NamedType: name}, types, nil)
	}
	for _, c := range crdSources {
		if err := addCRD(out, c.module, c.path, c.version); err != nil {
			return err
		}
	}
	for _, k := range goKinds {
		out[k.fileName()] = goSchema(k.typ, nil)
	}
	for name, s := range out {
		b, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// smdName is the kind's type in the structured-merge-diff schema.
func (g gvk) smdName() string {
	group := "core"
	if g.group != "" {
		group = strings.Split(g.group, ".")[0]
	}
	return "io.k8s.api." + group + "." + g.version + "." + g.kind
}

type smdRef struct {
	NamedType string   `json:"namedType"`
	Scalar    string   `json:"scalar"`
	List      *smdList `json:"list"`
	Map       *smdMap  `json:"map"`
}

type smdList struct {
	ElementType smdRef `json:"elementType"`
}

type smdMap struct {
	Fields []struct {
		Name string `json:"name"`
		Type smdRef `json:"type"`
	} `json:"fields"`
	ElementType *smdRef `json:"elementType"`
}

func readSMD() (map[string]smdRef, error) {
	dir, err := modDir(smdModule)
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(dir, smdPath))
	if err != nil {
		return nil, err
	}
	const open = "typed.YAMLObject(`"
	i := bytes.Index(src, []byte(open))
	j := bytes.LastIndex(src, []byte("`)"))
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: no schema literal", smdPath)
	}
	var doc struct {
		Types []struct {
			Name string `json:"name"`
			smdRef
		} `json:"types"`
	}
	if err := yaml.Unmarshal(src[i+len(open):j], &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", smdPath, err)
	}
	types := make(map[string]smdRef, len(doc.Types))
	for _, t := range doc.Types {
		types[t.Name] = t.smdRef
	}
	return types, nil
}

// scalarUnions are the untyped scalars YAML writes as a number or a string
// (maxUnavailable: 1 or 25%; memory: 1Gi, nvidia.com/gpu: 1), by the type
// besides string the API server accepts.
var scalarUnions = map[string]string{
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "integer",
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   "number",
}

// smdSchema is the JSON schema of ref, every named type inlined. A type that
// is several things at once (the untyped atomic: scalar, list or map) and
// other untyped scalars accept anything; a struct accepts only its fields.
func smdSchema(ref smdRef, types map[string]smdRef, path []string) any {
	if n := ref.NamedType; n != "" {
		if s, ok := scalarUnions[n]; ok {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": s}}}
		}
		if slices.Contains(path, n) {
			return map[string]any{}
		}
		return smdSchema(types[n], types, append(path, n))
	}
	kinds := 0
	for _, set := range []bool{ref.Scalar != "", ref.List != nil, ref.Map != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return map[string]any{}
	case ref.List != nil:
		return map[string]any{"type": "array", "items": smdSchema(ref.List.ElementType, types, path)}
	case ref.Map != nil:
		s := map[string]any{"type": "object"}
		if len(ref.Map.Fields) > 0 {
			props := map[string]any{}
			for _, f := range ref.Map.Fields {
				props[f.Name] = smdSchema(f.Type, types, path)
			}
			s["properties"] = props
		}
		if ref.Map.ElementType != nil {
			s["additionalProperties"] = smdSchema(*ref.Map.ElementType, types, path)
		} else {
			s["additionalProperties"] = false
		}
		return s
	}
	switch ref.Scalar {
	case "string":
		return map[string]any{"type": "string"}
	case "numeric":
		return map[string]any{"type": "number"}
	case "boolean":
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{}
}

// dropDocs removes descriptions (a string under "description"; a field
// named description is a schema, a map) to keep the vendored files small.
func dropDocs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if _, doc := x.(string); k == "description" && doc {
				continue
			}
			out[k] = dropDocs(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = dropDocs(x)
		}
		return out
	}
	return v
}

// strict forbids fields a schema does not list (what kubectl's validation
// and the API server's strict decoding reject), except where the schema
// preserves unknown fields; CRD int-or-string fields take either type.
func strict(v any, crd bool) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = strict(x, crd)
		}
		if crd && v["x-kubernetes-int-or-string"] == true {
			delete(v, "type")
			v["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		}
		_, hasProps := v["properties"]
		_, hasAdditional := v["additionalProperties"]
		if hasProps && !hasAdditional && v["x-kubernetes-preserve-unknown-fields"] != true {
			v["additionalProperties"] = false
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = strict(x, crd)
		}
	}
	return v
}

func addCRD(out map[string]any, module, path, version string) error {
	dir, err := modDir(module)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		return err
	}
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			k := gvk{crd.Spec.Group, v.Name, crd.Spec.Names.Kind}
			out[k.fileName()] = strict(dropDocs(v.Schema.OpenAPIV3Schema), true)
			return nil
		}
	}
	return fmt.Errorf("%s: no version %s", path, version)
}

// modDir is where the module cache holds module at the version this module
// requires. `go list -m` reads go.mod and the cache only: it downloads
// nothing, and says so with an empty Dir.
func modDir(module string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go list -m %s: %w: %s", module, err, stderr.String())
	}
	dir := strings.TrimSpace(stdout.String())
	if dir == "" {
		return "", fmt.Errorf("%w: %s (run go mod download %s)", errNotCached, module, module)
	}
	return dir, nil
}

var errNotCached = fmt.Errorf("module not in the module cache")

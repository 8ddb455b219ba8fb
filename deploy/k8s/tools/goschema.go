package tools

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// goKinds are kinds whose schema comes from their Go types: the
// prometheus-operator publishes its CRDs only inside its main module, whose
// dependency graph dwarfs this one's, while its API types are a small module
// of their own (pkg/apis/monitoring, pinned in go.mod).
var goKinds = []struct {
	gvk
	typ reflect.Type
}{
	{gvk{"monitoring.coreos.com", "v1", "PodMonitor"}, reflect.TypeFor[monitoringv1.PodMonitor]()},
}

var (
	typeObjectMeta  = reflect.TypeFor[metav1.ObjectMeta]()
	typeIntOrString = reflect.TypeFor[intstr.IntOrString]()
	typeQuantity    = reflect.TypeFor[resource.Quantity]()
	typeTime        = reflect.TypeFor[metav1.Time]()
	typeMarshaler   = reflect.TypeFor[json.Marshaler]()
)

// goSchema is the strict JSON schema of t as encoding/json reads it: a
// struct accepts only its json fields (inline and embedded ones merged),
// metadata is an object as in every CRD schema, and the types that marshal
// themselves take what they marshal to. Like the built-in kinds' schemas it
// has types, not required fields or enums (kubebuilder markers are comments).
func goSchema(t reflect.Type, path []reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case typeObjectMeta:
		return map[string]any{"type": "object"}
	case typeIntOrString:
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	case typeQuantity:
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	case typeTime:
		return map[string]any{"type": "string"}
	}
	if t.Implements(typeMarshaler) || reflect.PointerTo(t).Implements(typeMarshaler) {
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"}
		}
		return map[string]any{"type": "array", "items": goSchema(t.Elem(), path)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": goSchema(t.Elem(), path)}
	case reflect.Struct:
		if slices.Contains(path, t) {
			return map[string]any{}
		}
		props := map[string]any{}
		addFields(t, props, append(path, t))
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	}
	return map[string]any{}
}

// addFields adds t's json fields to props; an embedded struct without a
// json name, or one tagged ",inline", lends its own fields.
func addFields(t reflect.Type, props map[string]any, path []reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(opts, "inline")) {
			addFields(ft, props, path)
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = goSchema(f.Type, path)
	}
}

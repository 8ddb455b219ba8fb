package tools

import (
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Render is `helm template sluice CHART -n sluice -f FILE,...` with extra
// over the files' values (like --set), for the Kubernetes version the
// schemas describe, done as Helm's install action does it client-only
// (action.renderResources: values, engine, install order, "# Source:"
// headers) but without importing pkg/action, whose cluster client, registry
// and storage drivers would more than double this module's build. The value
// files are relative to the chart; the chart's own failures (a fail in a
// template) are returned.
func Render(chartDir, valueFiles string, extra map[string]any) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	vals := map[string]any{}
	for _, f := range strings.Split(valueFiles, ",") {
		if f == "" {
			continue
		}
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
		if err != nil {
			return "", err
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	if extra != nil {
		vals = chartutil.CoalesceTables(extra, vals)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.0", Major: "1", Minor: "37"}
	opts := chartutil.ReleaseOptions{Name: "sluice", Namespace: "sluice", Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return "", err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), nil
}

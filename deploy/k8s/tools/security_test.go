package tools

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// securityVariants are the committed variants plus one whose keys come from
// a Secret the operator made, with gRPC on (rendered, not committed).
var securityVariants = append(slices.Clone(variants), struct{ name, values string }{
	"cpu-existing-secret", "values-cpu.yaml,../../tools/testdata/existing-secret.yaml",
})

// TestSecurityDefaults checks what the server's safe defaults rely on in
// every variant: a pod that cannot become root or write its image, no
// service-account token, listeners bound as the NetworkPolicies expect, the
// API keys from a Secret, and the KV-event port open to the picker only.
func TestSecurityDefaults(t *testing.T) {
	for _, vr := range securityVariants {
		t.Run(vr.name, func(t *testing.T) {
			objs := objects(t, render(t, vr.values))
			pod := at(objs["Deployment/sluice"], "spec", "template")
			checkPodHardened(t, pod)
			c := at(pod, "spec", "containers", 0)
			args := at(c, "args").([]any)
			ports := containerPorts(c)

			if addr := flagValue(args, "--addr"); !bindsPodNetwork(addr, ports["http"]) {
				t.Errorf("--addr %v: serve's default is loopback; the chart must listen on the pod's interfaces on port %v", addr, ports["http"])
			}
			if p, ok := ports["grpc"]; ok && !bindsPodNetwork(flagValue(args, "--grpc-addr"), p) {
				t.Errorf("--grpc-addr %v, gRPC port %v", flagValue(args, "--grpc-addr"), p)
			}
			if p, ok := ports["kv-events"]; ok {
				want := fmt.Sprintf("tcp://$(POD_IP):%v", p)
				if got := flagValue(args, "--kv-events-endpoint"); got != want {
					t.Errorf("--kv-events-endpoint %v, want %s (the pod's own IP, not every interface)", got, want)
				}
				if p, ok := ports["kv-replay"]; ok {
					if got := flagValue(args, "--kv-events-replay-endpoint"); got != fmt.Sprintf("tcp://$(POD_IP):%v", p) {
						t.Errorf("--kv-events-replay-endpoint %v: the pod's own IP on port %v", got, p)
					}
				}
				if at(envVar(c, "POD_IP"), "valueFrom", "fieldRef", "fieldPath") != "status.podIP" {
					t.Errorf("POD_IP is not the downward API's status.podIP: %v", envVar(c, "POD_IP"))
				}
			}
			checkAPIKeys(t, objs, pod, c, args)
			checkNetworkPolicies(t, objs, pod, ports)
		})
	}
}

// checkPodHardened: non-root by number, no privilege escalation, no
// capabilities, a read-only root with /tmp the only writable path, the
// runtime's seccomp profile, and no service-account token.
func checkPodHardened(t *testing.T, pod any) {
	t.Helper()
	if at(pod, "spec", "automountServiceAccountToken") != false {
		t.Error("automountServiceAccountToken is not false: Sluice needs no token, a pod taken over would get one")
	}
	psc := at(pod, "spec", "securityContext")
	if at(psc, "runAsNonRoot") != true || at(psc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext %v: want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	for _, k := range []string{"runAsUser", "runAsGroup"} {
		if id, ok := at(psc, k).(float64); !ok || id <= 0 {
			t.Errorf("pod securityContext %s %v: want a non-root number", k, at(psc, k))
		}
	}
	var all []any
	for _, list := range []string{"initContainers", "containers"} {
		l, _ := at(pod, "spec", list).([]any)
		all = append(all, l...)
	}
	for _, c := range all {
		sc := at(c, "securityContext")
		drop, _ := at(sc, "capabilities", "drop").([]any)
		if at(sc, "allowPrivilegeEscalation") != false || at(sc, "readOnlyRootFilesystem") != true || !slices.Contains(drop, any("ALL")) {
			t.Errorf("container %v securityContext %v: want allowPrivilegeEscalation false, readOnlyRootFilesystem, drop ALL", at(c, "name"), sc)
		}
	}
	c := at(pod, "spec", "containers", 0)
	tmp := mountOf(c, "/tmp")
	if tmp == nil || at(volume(pod, at(tmp, "name")), "emptyDir") == nil {
		t.Error("no emptyDir on /tmp: the read-only root leaves the server nowhere to write")
	}
}

// checkAPIKeys: with keys, the Secret is mounted read-only and its file is
// the one --api-key-file names; without, neither flag nor Secret.
func checkAPIKeys(t *testing.T, objs map[string]map[string]any, pod, c any, args []any) {
	t.Helper()
	// The seal key's Secret (seal_test.go) is the other Secret a pod may mount.
	var sealVol any
	if f, ok := flagValue(args, "--seal-key-file").(string); ok {
		sealVol = at(mountOf(c, filepath.Dir(f)), "name")
	}
	var secretVol any
	for _, v := range at(pod, "spec", "volumes").([]any) {
		if at(v, "secret") != nil && (sealVol == nil || at(v, "name") != sealVol) {
			secretVol = v
		}
	}
	file := flagValue(args, "--api-key-file")
	if secretVol == nil {
		if file != nil {
			t.Errorf("--api-key-file %v with no Secret mounted", file)
		}
		return
	}
	path, ok := file.(string)
	if !ok {
		t.Fatalf("a Secret is mounted and --api-key-file is missing")
	}
	m := mountOf(c, filepath.Dir(path))
	if m == nil || at(m, "name") != at(secretVol, "name") || at(m, "readOnly") != true {
		t.Errorf("--api-key-file %s is not in the Secret's read-only mount (%v)", path, m)
	}
	if mode, _ := at(secretVol, "secret", "defaultMode").(float64); int(mode)&0o007 != 0 {
		t.Errorf("the keys file's mode %o lets every user of the pod read it", int(mode))
	}
	name := at(secretVol, "secret", "secretName")
	if s, created := objs[fmt.Sprintf("Secret/%v", name)]; created {
		keys, _ := at(s, "stringData", filepath.Base(path)).(string)
		if len(strings.Fields(keys)) == 0 {
			t.Errorf("Secret %v has no keys under %s", name, filepath.Base(path))
		}
		if at(pod, "metadata", "annotations", "checksum/api-keys") == nil {
			t.Error("no checksum/api-keys annotation: a changed key list would not reach running pods")
		}
	}
	if !slices.Contains(args, any("--metrics-public")) {
		t.Error("keys set without --metrics-public: the picker and Prometheus, which send no key, would lose /metrics")
	}
}

// checkNetworkPolicies: the API policy opens the HTTP (and gRPC) port to
// the picker among others; the KV-event policy opens only that port, and
// only to the picker's pods; no policy opens a port the pod lacks.
func checkNetworkPolicies(t *testing.T, objs map[string]map[string]any, pod any, ports map[any]any) {
	t.Helper()
	podLabels := at(pod, "metadata", "labels")
	picker := map[string]any{"app.kubernetes.io/name": "sluice-epp", "app.kubernetes.io/instance": "sluice"}
	opened := map[any][]any{} // port name -> peers, over every policy selecting the pods
	for _, name := range []string{"NetworkPolicy/sluice-api", "NetworkPolicy/sluice-kv-events"} {
		np, ok := objs[name]
		if !ok {
			if name == "NetworkPolicy/sluice-api" || ports["kv-events"] != nil {
				t.Errorf("no %s", name)
			}
			continue
		}
		if !reflect.DeepEqual(at(np, "spec", "podSelector", "matchLabels"), podLabels) || !slices.Contains(at(np, "spec", "policyTypes").([]any), any("Ingress")) {
			t.Errorf("%s does not isolate the Sluice pods' ingress", name)
		}
		for _, rule := range at(np, "spec", "ingress").([]any) {
			from, _ := at(rule, "from").([]any)
			if len(from) == 0 {
				t.Errorf("%s has a rule open to every source", name)
			}
			for _, p := range at(rule, "ports").([]any) {
				if _, ok := ports[at(p, "port")]; !ok {
					t.Errorf("%s opens port %v, which the pod does not have", name, at(p, "port"))
				}
				opened[at(p, "port")] = append(opened[at(p, "port")], from...)
			}
		}
	}
	isPicker := func(peer any) bool {
		return at(peer, "namespaceSelector") == nil && at(peer, "ipBlock") == nil &&
			reflect.DeepEqual(at(peer, "podSelector", "matchLabels"), picker)
	}
	for _, port := range []any{"http", "grpc"} {
		if _, ok := ports[port]; ok && !slices.ContainsFunc(opened[port], isPicker) {
			t.Errorf("port %v is closed to the picker, which scrapes /metrics", port)
		}
	}
	// The replay port resends the same events: the same rule.
	for _, port := range []any{"kv-events", "kv-replay"} {
		if _, ok := ports[port]; !ok {
			continue
		}
		peers := opened[port]
		if len(peers) == 0 || !slices.ContainsFunc(peers, isPicker) {
			t.Errorf("the %v port is closed to the picker", port)
		}
		for _, peer := range peers {
			if !isPicker(peer) {
				t.Errorf("the %v port, which carries every tenant's token ids, is open to %v", port, peer)
			}
		}
	}
}

// TestChartRefusesBadKeys: the chart fails rather than render a release
// whose key file would be empty, ambiguous, or hold a comment for a key.
func TestChartRefusesBadKeys(t *testing.T) {
	for name, apiKey := range map[string]map[string]any{
		"create without keys": {"create": true},
		"both sources":        {"create": true, "keys": []any{"k1"}, "existingSecret": "s"},
		"key with a space":    {"create": true, "keys": []any{"two words"}},
		"key read as comment": {"create": true, "keys": []any{"#k1"}},
	} {
		if _, err := renderWith("values-cpu.yaml", map[string]any{"apiKey": apiKey}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	if _, err := renderWith("values-cpu.yaml", map[string]any{"apiKey": map[string]any{"create": true, "keys": []any{"k1", "k2"}}}); err != nil {
		t.Errorf("two good keys: %v", err)
	}
	// Prometheus sends no key: a PodMonitor on a keyed /metrics would
	// scrape nothing but 401s.
	closed := map[string]any{"create": true, "keys": []any{"k1"}, "metricsPublic": false}
	if _, err := renderWith("values-cpu.yaml", map[string]any{"apiKey": closed, "podMonitor": map[string]any{"enabled": true}}); err == nil {
		t.Error("a PodMonitor with a keyed /metrics: rendered")
	}
}

// TestImagesRunAsChartUser: every Dockerfile's final stage runs as a
// numeric non-root user (a name cannot be checked by runAsNonRoot, and the
// kubelet refuses such a pod), the same user and group the chart sets.
func TestImagesRunAsChartUser(t *testing.T) {
	psc := at(objects(t, render(t, ""))["Deployment/sluice"], "spec", "template", "spec", "securityContext")
	want := fmt.Sprintf("%v:%v", at(psc, "runAsUser"), at(psc, "runAsGroup"))
	files, err := filepath.Glob("../../../Dockerfile*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".dockerignore") {
			continue
		}
		n++
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := finalUser(string(src)); got != want {
			t.Errorf("%s: the image runs as %q, the chart as %s", filepath.Base(f), got, want)
		}
	}
	if n == 0 {
		t.Fatal("no Dockerfile found")
	}
	if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(want) {
		t.Errorf("the chart runs as %s: want numeric, non-root", want)
	}
}

// finalUser is the last USER of the last stage ("" if it has none: root).
func finalUser(dockerfile string) string {
	user := ""
	for _, line := range strings.Split(dockerfile, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			user = ""
		case "USER":
			user = f[1]
		}
	}
	return user
}

// bindsPodNetwork: addr listens on every interface (or the pod's IP) at port.
func bindsPodNetwork(addr, port any) bool {
	s, _ := addr.(string)
	host, p, err := net.SplitHostPort(s)
	if err != nil || p != fmt.Sprint(port) {
		return false
	}
	switch host {
	case "", "0.0.0.0", "::", "$(POD_IP)":
		return true
	}
	return false
}

func flagValue(args []any, name string) any {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return nil
}

func containerPorts(c any) map[any]any {
	out := map[any]any{}
	for _, p := range at(c, "ports").([]any) {
		out[at(p, "name")] = strconv.Itoa(int(at(p, "containerPort").(float64)))
	}
	return out
}

func envVar(c any, name string) any {
	for _, e := range at(c, "env").([]any) {
		if at(e, "name") == name {
			return e
		}
	}
	return nil
}

func mountOf(c any, path string) any {
	for _, m := range at(c, "volumeMounts").([]any) {
		if at(m, "mountPath") == path {
			return m
		}
	}
	return nil
}

func volume(pod, name any) any {
	for _, v := range at(pod, "spec", "volumes").([]any) {
		if at(v, "name") == name {
			return v
		}
	}
	return nil
}

// Command pickerconfig prints the endpoint picker's EndpointPickerConfig as
// the chart renders it (the sluice-epp ConfigMap's config.yaml), for the
// values given: tests/llmd runs llm-d's picker on this machine with the
// config a cluster would get, not a copy of it. With -pod it prints what
// the chart gives a Sluice pod instead: the serve container's args and
// readiness probe, its preStop sleep and the termination grace, which the
// rolling-restart case plays as the kubelet would.
//
//	pickerconfig -chart deploy/k8s/chart/sluice -f values-cpu.yaml -set '{"picker":{"prefixScoring":"precise"}}'
//	pickerconfig -chart deploy/k8s/chart/sluice -f values-cpu.yaml -pod
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/deploy/k8s/tools"
)

func main() {
	chart := flag.String("chart", "deploy/k8s/chart/sluice", "the chart's directory")
	files := flag.String("f", "", "value files, comma-separated, relative to the chart")
	set := flag.String("set", "", "values over the files', as one JSON object")
	asJSON := flag.Bool("json", false, "print the config as JSON (which the picker's YAML loader reads too)")
	pod := flag.Bool("pod", false, "print the Sluice pod's serve args, readiness probe, preStop sleep and termination grace as JSON instead")
	flag.Parse()
	if err := run(*chart, *files, *set, *asJSON, *pod); err != nil {
		fmt.Fprintln(os.Stderr, "pickerconfig:", err)
		os.Exit(1)
	}
}

func run(chart, files, set string, asJSON, pod bool) error {
	var extra map[string]any
	if set != "" {
		if err := json.Unmarshal([]byte(set), &extra); err != nil {
			return fmt.Errorf("-set: %w", err)
		}
	}
	out, err := tools.Render(chart, files, extra)
	if err != nil {
		return err
	}
	if pod {
		return printPod(out)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return err
		}
		if obj.Kind == "ConfigMap" && strings.HasSuffix(obj.Metadata.Name, "-epp") {
			cfg, ok := obj.Data["config.yaml"]
			if !ok {
				return fmt.Errorf("ConfigMap %s has no config.yaml", obj.Metadata.Name)
			}
			out := []byte(cfg)
			if asJSON {
				if out, err = yaml.YAMLToJSON(out); err != nil {
					return fmt.Errorf("config.yaml: %w", err)
				}
			}
			_, err := os.Stdout.Write(out)
			return err
		}
	}
	return fmt.Errorf("the chart rendered no picker ConfigMap (picker.enabled and inferencePool.enabled?)")
}

// podSpec is the part of the Deployment the kubelet acts on at a rollout.
type podSpec struct {
	Spec struct {
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Name           string         `json:"name"`
					Args           []string       `json:"args"`
					ReadinessProbe map[string]any `json:"readinessProbe"`
					Lifecycle      struct {
						PreStop struct {
							Sleep struct {
								Seconds int `json:"seconds"`
							} `json:"sleep"`
						} `json:"preStop"`
					} `json:"lifecycle"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func printPod(rendered string) error {
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var obj struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return err
		}
		if obj.Kind != "Deployment" {
			continue
		}
		var d podSpec
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			return err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "sluice" {
				continue
			}
			return json.NewEncoder(os.Stdout).Encode(map[string]any{
				"args":                          c.Args,
				"readinessProbe":                c.ReadinessProbe,
				"preStopSleepSeconds":           c.Lifecycle.PreStop.Sleep.Seconds,
				"terminationGracePeriodSeconds": d.Spec.Template.Spec.TerminationGracePeriodSeconds,
			})
		}
	}
	return fmt.Errorf("the chart rendered no Deployment with a sluice container")
}

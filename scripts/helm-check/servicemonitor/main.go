// Command servicemonitor checks the ServiceMonitor objects in rendered Kubernetes manifests
// (helm template output, on stdin) against the Prometheus Operator's own Go API types
// (monitoring.coreos.com/v1): a strict decode, so that an unknown or misspelled field, or a
// value of the wrong type, is an error, as the API server's strict field validation would make
// it. The ServiceMonitor CRD is not in the Kubernetes schemas kubernetes-validate ships, so
// scripts/check-helm.sh checks its shape here. Also required by the operator in practice: a
// selector and at least one endpoint naming a port.
//
// Exit 0: every ServiceMonitor decodes (and it prints how many); 1: one does not; 2: no input.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// The pattern the CRD gives monitoringv1.Duration (a Prometheus duration): decoding does not
// check it, the API server does.
var duration = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

func main() {
	in, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil || len(bytes.TrimSpace(in)) == 0 {
		fmt.Fprintln(os.Stderr, "servicemonitor: no manifests on stdin")
		os.Exit(2)
	}
	checked, failed := 0, 0
	for i, doc := range strings.Split(string(in), "\n---") {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			fmt.Fprintf(os.Stderr, "document %d: not YAML: %v\n", i+1, err)
			failed++
			continue
		}
		if head.Kind != "ServiceMonitor" {
			continue
		}
		checked++
		if head.APIVersion != "monitoring.coreos.com/v1" {
			fmt.Fprintf(os.Stderr, "document %d: apiVersion %q is not monitoring.coreos.com/v1\n", i+1, head.APIVersion)
			failed++
			continue
		}
		var sm monitoringv1.ServiceMonitor
		if err := yaml.UnmarshalStrict([]byte(doc), &sm); err != nil {
			fmt.Fprintf(os.Stderr, "ServiceMonitor (document %d): %v\n", i+1, err)
			failed++
			continue
		}
		if sm.Name == "" || len(sm.Spec.Selector.MatchLabels)+len(sm.Spec.Selector.MatchExpressions) == 0 || len(sm.Spec.Endpoints) == 0 {
			fmt.Fprintf(os.Stderr, "ServiceMonitor %q: needs a name, a selector and an endpoint\n", sm.Name)
			failed++
			continue
		}
		for _, e := range sm.Spec.Endpoints {
			if e.Port == "" && e.TargetPort == nil {
				fmt.Fprintf(os.Stderr, "ServiceMonitor %q: an endpoint names no port\n", sm.Name)
				failed++
			}
			for _, d := range []monitoringv1.Duration{e.Interval, e.ScrapeTimeout} {
				if d != "" && !duration.MatchString(string(d)) {
					fmt.Fprintf(os.Stderr, "ServiceMonitor %q: %q is not a Prometheus duration\n", sm.Name, d)
					failed++
				}
			}
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
	fmt.Printf("servicemonitor: %d ServiceMonitor(s) decode strictly as monitoring.coreos.com/v1\n", checked)
}

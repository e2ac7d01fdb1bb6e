package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// validateVersions are the Kubernetes versions every core object is
// validated against: the oldest the chart supports and the newest the
// pinned kubernetes-validate bundles.
var validateVersions = []string{"1.30.0", "1.37.0"}

// valueSets are the configurations validated: the defaults, the hardened
// example, and the paths neither takes (chart-made Kafka, API token and
// handlers from values, mutual TLS, no monitoring CRDs).
var valueSets = []struct {
	files, sets []string
}{
	{nil, nil},
	{[]string{hardenedValues}, nil},
	{nil, []string{
		`kafka={"brokers":"k:9093","tls":{"enabled":true,"existingSecret":"kafka-mtls","caKey":"ca.crt","certKey":"tls.crt","keyKey":"tls.key","serverName":"k"},"sasl":{"mechanism":"PLAIN","user":"u","existingSecret":"","passwordKey":"password","password":"dev"}}`,
		`api={"enabled":true,"token":{"value":"dev-token","existingSecret":"","secretKey":"token"}}`,
		`workers=[{"name":"inline","group":"g","topics":["a","b"],"replicas":1,"handlers":"unknown: skip\nhandlers: {}\n"},{"name":"bare","group":"h","topics":["c"],"replicas":0}]`,
		`metrics={"serviceMonitor":{"enabled":false},"prometheusRule":{"enabled":false}}`,
		`migration={"enabled":false}`,
		`podAnnotations={"example.com/team":"payments"}`,
	}},
}

// validator is the kubernetes-validate program (PyPI, pinned; installed by
// `make helm-check` into .eventforge/kubevalidate), from
// EVENTFORGE_KUBE_VALIDATE.
func validator(t *testing.T) string {
	t.Helper()
	p := os.Getenv("EVENTFORGE_KUBE_VALIDATE")
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("EVENTFORGE_KUBE_VALIDATE is not set: run make helm-check")
		}
		t.Skip("EVENTFORGE_KUBE_VALIDATE is not set: run make helm-check")
	}
	return p
}

var passedLine = regexp.MustCompile(`(?m)^INFO (\S+) passed for resource (\S+) against version`)

// TestRenderedObjectsMatchKubernetesSchemas validates every rendered object
// of both value sets: the core kinds with kubernetes-validate --strict
// (unknown fields are errors) against Kubernetes 1.30 and 1.37; the
// Prometheus Operator kinds, which those schemas lack, by a strict decode
// into prometheus-operator's own API types.
func TestRenderedObjectsMatchKubernetesSchemas(t *testing.T) {
	kv := validator(t)
	dir := t.TempDir()
	var files []string
	core, monitoring := 0, 0
	for i, c := range valueSets {
		r := render(t, c.files, c.sets...)
		var docs []string
		for _, o := range r.objects {
			if api, _ := o["apiVersion"].(string); strings.HasPrefix(api, "monitoring.coreos.com/") {
				checkMonitoring(t, o)
				monitoring++
				continue
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
			core++
		}
		files = append(files, writeManifest(t, dir, fmt.Sprintf("values-%d.yaml", i),
			rendering{manifest: strings.Join(docs, "---\n")}))
	}
	for _, v := range validateVersions {
		var out bytes.Buffer
		cmd := exec.Command(kv, append([]string{"--strict", "-k", v}, files...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		passed := len(passedLine.FindAllString(out.String(), -1))
		if err != nil || passed != core || strings.Contains(out.String(), "ERROR") || strings.Contains(out.String(), "WARN") {
			t.Fatalf("kubernetes-validate %s: %v, %d of %d objects passed:\n%s", v, err, passed, core, out.String())
		}
		t.Logf("schema validation: %d of %d objects passed against Kubernetes %s (strict)", passed, core, v)
	}
	t.Logf("schema validation: %d monitoring.coreos.com objects decoded strictly into prometheus-operator types", monitoring)
}

// checkMonitoring decodes a ServiceMonitor or PrometheusRule into the
// operator's Go types, rejecting unknown fields, and checks what the types
// cannot: the ServiceMonitor selects the metrics Service, the rules are the
// groups of the rule file.
func checkMonitoring(t *testing.T, o object) {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	switch o.kind() {
	case monitoringv1.ServiceMonitorsKind:
		var sm monitoringv1.ServiceMonitor
		if err := dec.Decode(&sm); err != nil {
			t.Fatalf("ServiceMonitor %s: %v", o.name(), err)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
			t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
		}
	case monitoringv1.PrometheusRuleKind:
		var pr monitoringv1.PrometheusRule
		if err := dec.Decode(&pr); err != nil {
			t.Fatalf("PrometheusRule %s: %v", o.name(), err)
		}
		if len(pr.Spec.Groups) == 0 {
			t.Error("PrometheusRule without groups")
		}
	default:
		t.Errorf("unexpected monitoring kind %s", o.kind())
	}
}

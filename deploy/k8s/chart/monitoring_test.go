package chart

import (
	"os"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// rulesFile is the rule file promtool tests (deploy/prometheus/rules_test.go).
const rulesFile = "../../prometheus/rules/eventforge.rules.yml"

// TestPrometheusRuleIsTheTestedRuleFile: the chart's copy of the rules is
// byte for byte the file promtool tests, and the PrometheusRule carries its
// groups unchanged (templates such as {{ $labels.slot }} are not expanded
// by Helm).
func TestPrometheusRuleIsTheTestedRuleFile(t *testing.T) {
	mustEqualFiles(t, rulesFile, chartDir+"/files/eventforge.rules.yml")
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	r := render(t, nil)
	pr := r.find(t, "PrometheusRule", "eventforge")
	got := get(map[string]any(pr), "spec", "groups")
	if !reflect.DeepEqual(got, want["groups"]) {
		t.Errorf("PrometheusRule groups differ from %s", rulesFile)
	}
}

// TestServiceMonitorLabelsComponent: the alerts select targets by a
// component label (up{component="cdc"}); the ServiceMonitor sets it from
// the pod's app.kubernetes.io/component label, and every long-running pod
// is behind the metrics Service.
func TestServiceMonitorLabelsComponent(t *testing.T) {
	r := render(t, []string{hardenedValues})
	sm := r.find(t, "ServiceMonitor", "eventforge")
	relabel := get(map[string]any(sm), "spec", "endpoints", 0, "relabelings", 0)
	if get(relabel, "targetLabel") != "component" ||
		get(relabel, "sourceLabels", 0) != "__meta_kubernetes_pod_label_app_kubernetes_io_component" {
		t.Errorf("relabeling %v", relabel)
	}
	svc := r.find(t, "Service", "eventforge-metrics")
	sel, _ := get(map[string]any(svc), "spec", "selector").(map[string]any)
	if get(map[string]any(sm), "spec", "selector", "matchLabels", "eventforge.dev/metrics") != "true" {
		t.Error("ServiceMonitor does not select the metrics Service")
	}
	components := map[string]bool{}
	for _, d := range r.ofKind("Deployment") {
		labels, _ := get(map[string]any(d), "spec", "template", "metadata", "labels").(map[string]any)
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: pod label %s=%v, the metrics Service selects %v", d.name(), k, labels[k], v)
			}
		}
		c, _ := labels["app.kubernetes.io/component"].(string)
		components[c] = true
	}
	for _, c := range []string{"cdc", "worker", "api"} {
		if !components[c] {
			t.Errorf("no %s pods behind the metrics Service", c)
		}
	}
}

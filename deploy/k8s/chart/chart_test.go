package chart

import (
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
)

// TestHelmLint is `helm lint --strict` of the chart with its default values
// and with the hardened example.
func TestHelmLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{nil, {hardenedValues}} {
		t.Run(fmt.Sprint(files), func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "eventforge"
			lint.KubeVersion = kv
			vals := map[string]any{}
			if len(files) > 0 {
				vals = mustValues(t, files)
			}
			res := lint.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				t.Log(m.Error())
			}
			if res.TotalChartsLinted != 1 || len(res.Errors) > 0 {
				t.Fatalf("lint: %d charts linted, errors %v", res.TotalChartsLinted, res.Errors)
			}
		})
	}
}

// TestTemplateSizes renders both value sets and logs their size, as
// `helm template` prints them.
func TestTemplateSizes(t *testing.T) {
	for _, files := range [][]string{nil, {hardenedValues}} {
		r := render(t, files)
		t.Logf("helm template %v: %d bytes, %d objects: %s", files, len(r.manifest), len(r.objects), r.summary())
		if len(r.objects) < 10 {
			t.Errorf("only %d objects", len(r.objects))
		}
	}
}

// TestRelayRolloutKeepsAStandby pins the relay's availability choices: two
// replicas, a rollout that starts a new pod and waits for it to be ready
// (streaming or standby) before stopping an old one, a PodDisruptionBudget
// that keeps one, readiness on /readyz and liveness on /healthz.
func TestRelayRolloutKeepsAStandby(t *testing.T) {
	r := render(t, nil)
	d := r.find(t, "Deployment", "eventforge-relay")
	if got := get(map[string]any(d), "spec", "replicas"); got != float64(2) {
		t.Errorf("replicas %v, want 2", got)
	}
	ru := get(map[string]any(d), "spec", "strategy", "rollingUpdate")
	if get(ru, "maxUnavailable") != float64(0) || get(ru, "maxSurge") != float64(1) {
		t.Errorf("rollingUpdate %v, want maxUnavailable 0, maxSurge 1", ru)
	}
	c := container(d)
	if p := get(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness path %v, want /readyz", p)
	}
	if p := get(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness path %v, want /healthz (a standby must not be restarted)", p)
	}
	if p := get(c, "readinessProbe", "httpGet", "port"); p != "metrics" {
		t.Errorf("readiness port %v, want the metrics port", p)
	}
	if args := fmt.Sprint(c["args"]); args != "[cdc run]" {
		t.Errorf("args %s", args)
	}
	// The grace period covers the relay's shutdown timeout (30 s).
	if g, _ := get(podSpec(d), "terminationGracePeriodSeconds").(float64); g <= 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the 30 s shutdown timeout", g)
	}
	pdb := r.find(t, "PodDisruptionBudget", "eventforge-relay")
	if got := get(map[string]any(pdb), "spec", "minAvailable"); got != float64(1) {
		t.Errorf("PDB minAvailable %v, want 1", got)
	}
	if fmt.Sprint(get(map[string]any(pdb), "spec", "selector", "matchLabels")) !=
		fmt.Sprint(get(map[string]any(d), "spec", "selector", "matchLabels")) {
		t.Error("the relay PDB selects other pods than the Deployment")
	}
	// Preferred anti-affinity by default: the pair lands on two nodes when it can.
	if get(podSpec(d), "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm", "topologyKey") != "kubernetes.io/hostname" {
		t.Error("no default anti-affinity between the relay replicas")
	}
}

// TestWorkersPerConsumer: one Deployment, handlers ConfigMap and PDB per
// workers entry, with the group, topics and handlers path wired through.
func TestWorkersPerConsumer(t *testing.T) {
	r := render(t, []string{hardenedValues})
	orders := r.find(t, "Deployment", "eventforge-worker-orders")
	env := envOf(container(orders))
	want := map[string]string{
		"EVENTFORGE_GROUP":    "orders-fulfilment",
		"EVENTFORGE_TOPICS":   "orders",
		"EVENTFORGE_HANDLERS": "/etc/eventforge/handlers/handlers.yaml",
		"EVENTFORGE_PG_URL":   "secret:eventforge-worker-pg/pg-url",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("orders worker %s = %q, want %q", k, env[k], v)
		}
	}
	cm := r.find(t, "ConfigMap", "eventforge-worker-orders-handlers")
	if h, _ := get(map[string]any(cm), "data", "handlers.yaml").(string); !strings.Contains(h, "order.created:") {
		t.Errorf("handlers ConfigMap lacks the demo handler: %q", h)
	}
	billing := r.find(t, "Deployment", "eventforge-worker-billing")
	env = envOf(container(billing))
	if env["EVENTFORGE_TOPICS"] != "orders,payments" || env["EVENTFORGE_CONSUMER"] != "billing-v1" ||
		env["EVENTFORGE_PG_URL"] != "secret:eventforge-billing-pg/pg-url" || env["EVENTFORGE_BATCH_SIZE"] != "200" {
		t.Errorf("billing worker env %v", env)
	}
	if v := volume(billing, "handlers"); get(v, "configMap", "name") != "billing-handlers" {
		t.Errorf("billing worker does not mount its existing ConfigMap: %v", get(podSpec(billing), "volumes"))
	}
	if get(map[string]any(billing), "spec", "replicas") != float64(2) {
		t.Error("billing worker replicas")
	}
	r.find(t, "PodDisruptionBudget", "eventforge-worker-billing")
	if n := len(r.ofKind("ConfigMap")); n != 1 {
		t.Errorf("%d ConfigMaps, want only the orders handlers (billing brings its own)", n)
	}
}

// TestHandlersFileIsTheDemoHandlers: the chart's copy of the demo handlers
// file is the one in deploy/handlers.
func TestHandlersFileIsTheDemoHandlers(t *testing.T) {
	mustEqualFiles(t, "../../handlers/orders.yaml", chartDir+"/files/orders.yaml")
}

// TestAPIServiceAndProbes: with api.enabled the API gets a Service on its
// http port selecting only API pods, readiness on /readyz, and its own
// PodDisruptionBudget; without it nothing of the API renders.
func TestAPIServiceAndProbes(t *testing.T) {
	if r := render(t, nil); strings.Contains(r.summary(), "-api") {
		t.Errorf("API objects without api.enabled: %s", r.summary())
	}
	r := render(t, []string{hardenedValues})
	svc := r.find(t, "Service", "eventforge-api")
	if get(map[string]any(svc), "spec", "ports", 0, "targetPort") != "http" || get(map[string]any(svc), "spec", "ports", 0, "port") != float64(80) {
		t.Errorf("API Service ports %v", get(map[string]any(svc), "spec", "ports"))
	}
	if get(map[string]any(svc), "spec", "selector", "app.kubernetes.io/component") != "api" {
		t.Errorf("API Service selector %v", get(map[string]any(svc), "spec", "selector"))
	}
	d := r.find(t, "Deployment", "eventforge-api")
	c := container(d)
	if get(c, "readinessProbe", "httpGet", "path") != "/readyz" || get(c, "ports", 0, "name") != "http" {
		t.Errorf("API container probes/ports: %v %v", c["readinessProbe"], c["ports"])
	}
	if env := envOf(c); env["EVENTFORGE_HTTP_ADDR"] != "0.0.0.0:8080" || env["EVENTFORGE_METRICS_ADDR"] != "0.0.0.0:9090" {
		t.Errorf("API addresses %v", env)
	}
	r.find(t, "PodDisruptionBudget", "eventforge-api")
}

// volume is the pod volume of w named name, nil when there is none.
func volume(w object, name string) any {
	vols, _ := podSpec(w)["volumes"].([]any)
	for _, v := range vols {
		if get(v, "name") == name {
			return v
		}
	}
	return nil
}

package chart

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"

	"github.com/eventforge/eventforge/deploy/k8s/helmrender"
)

// chartDir is the chart, relative to this package.
const chartDir = "../../helm/eventforge"

// hardenedValues is the production-style example the chart ships.
const hardenedValues = chartDir + "/ci/hardened-values.yaml"

// kubeVersion is the oldest Kubernetes the chart supports (Chart.yaml
// kubeVersion), the version templates see.
const kubeVersion = "v1.30.0"

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := get(map[string]any(o), "metadata", "name").(string); return s }

// rendering is the output of `helm template`: the manifest text (hooks
// included, as helm template prints them) and its objects.
type rendering struct {
	manifest string
	objects  []object
	notes    string
}

// render renders the chart like `helm template eventforge CHART -f files...
// --set-json sets...`, through the Helm library.
func render(t *testing.T, files []string, sets ...string) rendering {
	t.Helper()
	r, err := renderErr(files, sets...)
	if err != nil {
		t.Fatalf("render %v %v: %v", files, sets, err)
	}
	return r
}

func renderErr(files []string, sets ...string) (rendering, error) {
	r, err := helmrender.Render(helmrender.Options{Chart: chartDir, ValueFiles: files, Sets: sets, KubeVersion: kubeVersion})
	if err != nil {
		return rendering{}, err
	}
	objs := make([]object, len(r.Objects))
	for i, o := range r.Objects {
		objs[i] = o
	}
	return rendering{manifest: r.Manifest, objects: objs, notes: r.Notes}, nil
}

// get is helmrender.Get.
func get(v any, path ...any) any {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	return helmrender.Get(v, path...)
}

// find returns the one object of kind and name, failing the test otherwise.
func (r rendering) find(t *testing.T, kind, name string) object {
	t.Helper()
	for _, o := range r.objects {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %q in %s", kind, name, r.summary())
	return nil
}

// ofKind returns the objects of kind.
func (r rendering) ofKind(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// summary lists kind/name of every object, sorted.
func (r rendering) summary() string {
	var s []string
	for _, o := range r.objects {
		s = append(s, o.kind()+"/"+o.name())
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// container returns the first container of a workload's pod template.
func container(o object) map[string]any {
	spec := podSpec(o)
	c, _ := get(spec, "containers", 0).(map[string]any)
	return c
}

func podSpec(o object) map[string]any {
	s, _ := get(map[string]any(o), "spec", "template", "spec").(map[string]any)
	return s
}

// envOf maps a container's variables to their value, or to
// "secret:NAME/KEY" for a secretKeyRef.
func envOf(c map[string]any) map[string]string {
	out := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		name, _ := get(e, "name").(string)
		if v, ok := get(e, "value").(string); ok {
			out[name] = v
			continue
		}
		if ref, ok := get(e, "valueFrom", "secretKeyRef").(map[string]any); ok {
			out[name] = fmt.Sprintf("secret:%v/%v", ref["name"], ref["key"])
			continue
		}
		out[name] = "<other>"
	}
	return out
}

// writeManifest writes r's manifest to a file in dir and returns its path.
func writeManifest(t *testing.T, dir, name string, r rendering) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(r.manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustEqualFiles fails unless a and b have the same bytes.
func mustEqualFiles(t *testing.T, a, b string) {
	t.Helper()
	x, errA := os.ReadFile(a)
	y, errB := os.ReadFile(b)
	if err := errors.Join(errA, errB); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s differs from %s: copy it again (cp %s %s)", b, a, a, b)
	}
}

// mustValues merges values files like helm -f.
func mustValues(t *testing.T, files []string) map[string]any {
	t.Helper()
	vals, err := (&values.Options{ValueFiles: files}).MergeValues(getter.Providers{})
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

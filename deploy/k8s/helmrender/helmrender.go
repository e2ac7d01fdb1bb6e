// Package helmrender renders a Helm chart like `helm template` does,
// through the Helm library (no helm binary, no cluster), for the chart's
// tests.
package helmrender

import (
	"fmt"
	"io"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"
)

// Options are what `helm template` takes.
type Options struct {
	// Chart is the chart directory.
	Chart string
	// ValueFiles are -f files, Sets --set-json expressions (path=json).
	ValueFiles, Sets []string
	// ReleaseName and Namespace default to "eventforge".
	ReleaseName, Namespace string
	// KubeVersion is the version templates see; default v1.30.0.
	KubeVersion string
}

// Rendering is the manifest (hooks included, as helm template prints them)
// and its objects, in order, and the rendered NOTES.txt.
type Rendering struct {
	Manifest string
	Objects  []map[string]any
	Notes    string
}

// Render loads, validates (values.schema.json) and renders the chart.
func Render(o Options) (Rendering, error) {
	if o.ReleaseName == "" {
		o.ReleaseName = "eventforge"
	}
	if o.Namespace == "" {
		o.Namespace = "eventforge"
	}
	if o.KubeVersion == "" {
		o.KubeVersion = "v1.30.0"
	}
	ch, err := loader.Load(o.Chart)
	if err != nil {
		return Rendering{}, fmt.Errorf("load chart: %w", err)
	}
	vals, err := (&values.Options{ValueFiles: o.ValueFiles, JSONValues: o.Sets}).MergeValues(getter.Providers{})
	if err != nil {
		return Rendering{}, fmt.Errorf("merge values: %w", err)
	}
	kv, err := common.ParseKubeVersion(o.KubeVersion)
	if err != nil {
		return Rendering{}, err
	}
	cfg := action.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	cfg.Capabilities = common.DefaultCapabilities
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = o.ReleaseName, o.Namespace
	install.Replace = true
	install.KubeVersion = kv
	rel, err := install.Run(ch, vals)
	if err != nil {
		return Rendering{}, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return Rendering{}, fmt.Errorf("release of type %T", rel)
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(r.Manifest))
	b.WriteString("\n")
	for _, h := range r.Hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	objs, err := Split(b.String())
	if err != nil {
		return Rendering{}, err
	}
	var notes string
	if r.Info != nil {
		notes = r.Info.Notes
	}
	return Rendering{Manifest: b.String(), Objects: objs, Notes: notes}, nil
}

// Split parses a multi-document manifest; empty documents are skipped.
func Split(manifest string) ([]map[string]any, error) {
	var objs []map[string]any
	for i, doc := range strings.Split(manifest, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// Get walks maps and lists (an int indexes a list) and returns nil for a
// missing step.
func Get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

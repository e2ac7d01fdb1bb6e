// Package e2e runs what the chart renders, without a cluster: the commands,
// arguments and environment of its Job and Deployments (Secrets resolved
// from the rendered Secrets), with the binary of the image, against the
// local PostgreSQL and Kafka; the probes are the manifest's.
package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/deploy/k8s/helmrender"
	"github.com/eventforge/eventforge/deploy/k8s/imagebuild"
	"github.com/eventforge/eventforge/internal/testenv"
)

var chartDir string

// TestMain runs the tests from the repository root, where testenv finds the
// local services' scripts.
func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	chartDir = filepath.Join(wd, "../../helm/eventforge")
	if err := os.Chdir(filepath.Join(wd, "../../..")); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// binary is the eventforge of the image `make image` wrote
// (EVENTFORGE_IMAGE_TAR), else one built from the sources.
func binary(t *testing.T) string {
	t.Helper()
	tarPath := os.Getenv("EVENTFORGE_IMAGE_TAR")
	if tarPath == "" {
		return testenv.Binary(t)
	}
	bin := filepath.Join(t.TempDir(), "eventforge")
	if err := imagebuild.ExtractBinary(tarPath, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// workload is one rendered container, ready to run as a process.
type workload struct {
	name string
	args []string
	env  []string
	obj  map[string]any
}

// container finds the first container of kind/name and resolves its env:
// secretKeyRefs from the rendered Secrets, the metrics address to a free
// loopback port (a pod has its own network namespace; processes do not).
func container(t *testing.T, r helmrender.Rendering, kind, name string) (workload, string) {
	t.Helper()
	secrets := map[string]map[string]any{}
	var obj map[string]any
	for _, o := range r.Objects {
		n, _ := helmrender.Get(o, "metadata", "name").(string)
		switch o["kind"] {
		case "Secret":
			secrets[n], _ = o["data"].(map[string]any)
		case kind:
			if n == name {
				obj = o
			}
		}
	}
	if obj == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	c := helmrender.Get(obj, "spec", "template", "spec", "containers", 0)
	w := workload{name: name, obj: obj}
	for _, a := range helmrender.Get(c, "args").([]any) {
		w.args = append(w.args, a.(string))
	}
	metricsAddr := ""
	for _, e := range helmrender.Get(c, "env").([]any) {
		k := helmrender.Get(e, "name").(string)
		v, isValue := helmrender.Get(e, "value").(string)
		if !isValue {
			ref := helmrender.Get(e, "valueFrom", "secretKeyRef")
			data := secrets[helmrender.Get(ref, "name").(string)]
			enc, ok := data[helmrender.Get(ref, "key").(string)].(string)
			if !ok {
				t.Fatalf("%s: %s refers to a Secret the chart did not render: %v", name, k, ref)
			}
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				t.Fatal(err)
			}
			v = string(b)
		}
		if k == "EVENTFORGE_METRICS_ADDR" {
			if v != "0.0.0.0:9090" {
				t.Errorf("%s: metrics address %q, want the pod's port 9090", name, v)
			}
			metricsAddr = testenv.FreeAddr(t)
			v = metricsAddr
		}
		w.env = append(w.env, k+"="+v)
	}
	return w, metricsAddr
}

// proc is one running replica.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testenv.Buffer
	done   chan error
}

func start(t *testing.T, bin string, w workload, addr string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, w.args...), addr: addr, stderr: &testenv.Buffer{}, done: make(chan error, 1)}
	p.cmd.Env = append([]string{"HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}, w.env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stderr:\n%s", addr, p.stderr.String())
		}
	})
	return p
}

// get answers the status code and body of a GET, 0 when nothing answers.
func (p *proc) get(path string) (int, string) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gauge is the value of an unlabelled gauge in /metrics, -1 when absent.
func (p *proc) gauge(name string) float64 {
	_, body := p.get("/metrics")
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	var v float64
	_, _ = fmt.Sscan(m[1], &v)
	return v
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jsonValue(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChartRelayPairFailsOver runs the chart's migration Job, then two
// replicas of its relay Deployment on one slot: both pass the manifest's
// readiness probe (one streams, one is the standby), liveness holds for
// both, and after the SIGTERM a rollout sends to the active pod it exits
// cleanly within the grace period and the standby takes the slot over.
func TestChartRelayPairFailsOver(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := map[string]string{"url": url, "existingSecret": "", "secretKey": "pg-url"}
	r, err := helmrender.Render(helmrender.Options{Chart: chartDir, Sets: []string{
		"relay.database=" + jsonValue(t, db),
		"migration.database=" + jsonValue(t, db),
		"kafka.brokers=" + jsonValue(t, strings.Join(env.Brokers, ",")),
		"relay.slot=" + jsonValue(t, testenv.UniqueName("kube")),
		"relay.env=" + jsonValue(t, map[string]string{"EVENTFORGE_TOPIC_PREFIX": testenv.UniqueName("kube") + "."}),
		"workers=[]",
	}})
	if err != nil {
		t.Fatal(err)
	}
	bin := binary(t)

	job, _ := container(t, r, "Job", "eventforge-migrate")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, job.args...)
	cmd.Env = job.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("migration Job %v: %v\n%s", job.args, err, out)
	}

	relay, _ := container(t, r, "Deployment", "eventforge-relay")
	c := helmrender.Get(relay.obj, "spec", "template", "spec", "containers", 0)
	readyPath := helmrender.Get(c, "readinessProbe", "httpGet", "path").(string)
	livePath := helmrender.Get(c, "livenessProbe", "httpGet", "path").(string)
	grace := time.Duration(helmrender.Get(relay.obj, "spec", "template", "spec", "terminationGracePeriodSeconds").(float64)) * time.Second

	replicas := int(helmrender.Get(relay.obj, "spec", "replicas").(float64))
	if replicas != 2 {
		t.Fatalf("%d relay replicas, want 2", replicas)
	}
	// The second replica starts once the first streams, as in a rollout or a
	// rescheduled pod. (Two relays starting at the same instant on a slot
	// that does not exist yet race to create it; the loser exits and is
	// restarted: not what this test is about.)
	ready := func(p *proc) bool { code, _ := p.get(readyPath); return code == http.StatusOK }
	w, addr := container(t, r, "Deployment", "eventforge-relay")
	active := start(t, bin, w, addr)
	waitFor(t, 60*time.Second, "first relay ready and streaming", func() bool {
		return ready(active) && active.gauge("eventforge_cdc_streaming") == 1
	})
	w, addr = container(t, r, "Deployment", "eventforge-relay")
	standby := start(t, bin, w, addr)
	waitFor(t, 60*time.Second, "second relay ready as the standby", func() bool {
		return ready(standby) && standby.gauge("eventforge_cdc_standby") == 1
	})
	if active.gauge("eventforge_cdc_streaming") != 1 {
		t.Fatal("the first relay stopped streaming when the standby came")
	}
	pods := []*proc{active, standby}
	for _, p := range pods {
		if code, _ := p.get(livePath); code != http.StatusOK {
			t.Errorf("%s %s = %d, want 200", p.addr, livePath, code)
		}
	}
	_, body := standby.get(readyPath)
	t.Logf("standby %s: %s", readyPath, strings.TrimSpace(body))

	// A rollout stops the active pod with SIGTERM and waits up to the grace period.
	if err := active.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case err := <-active.done:
		active.done <- err
		if err != nil {
			t.Fatalf("active relay after SIGTERM: %v\n%s", err, active.stderr.String())
		}
	case <-time.After(grace):
		t.Fatalf("active relay still running %s after SIGTERM (the grace period)", grace)
	}
	waitFor(t, 30*time.Second, "standby takes over", func() bool { return standby.gauge("eventforge_cdc_streaming") == 1 })
	t.Logf("standby streaming %s after SIGTERM of the active relay", time.Since(stopped).Round(time.Millisecond))
	if !ready(standby) {
		t.Error("the relay that took over is not ready")
	}
}

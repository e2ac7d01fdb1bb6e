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
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
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
	// addrs maps each listening address of the pod (0.0.0.0:port) to the
	// free loopback address the process gets instead.
	addrs map[string]string
}

// rendered indexes the objects of a rendering by kind and name.
type rendered map[string]map[string]any

func index(r helmrender.Rendering) rendered {
	out := rendered{}
	for _, o := range r.Objects {
		n, _ := helmrender.Get(o, "metadata", "name").(string)
		out[fmt.Sprint(o["kind"], "/", n)] = o
	}
	return out
}

// container turns the first container of kind/name into a process the way
// the kubelet would run it: secretKeyRefs resolved from the rendered
// Secrets; Secret, ConfigMap and emptyDir volumes written to a temporary
// directory, and environment values under a mount path pointed there;
// every 0.0.0.0 listening address moved to a free loopback port (a pod has
// its own network namespace, processes share one).
func container(t *testing.T, r helmrender.Rendering, kind, name string) workload {
	t.Helper()
	objs := index(r)
	obj := objs[kind+"/"+name]
	if obj == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	spec := helmrender.Get(obj, "spec", "template", "spec")
	c := helmrender.Get(spec, "containers", 0)
	w := workload{name: name, obj: obj, addrs: map[string]string{}}
	for _, a := range helmrender.Get(c, "args").([]any) {
		w.args = append(w.args, a.(string))
	}
	mounts := mountVolumes(t, objs, spec, c)
	for _, e := range helmrender.Get(c, "env").([]any) {
		k := helmrender.Get(e, "name").(string)
		v, isValue := helmrender.Get(e, "value").(string)
		if !isValue {
			ref := helmrender.Get(e, "valueFrom", "secretKeyRef")
			v = string(secretData(t, objs, helmrender.Get(ref, "name").(string))[helmrender.Get(ref, "key").(string)])
		}
		if strings.HasPrefix(v, "0.0.0.0:") {
			w.addrs[v] = testenv.FreeAddr(t)
			v = w.addrs[v]
		}
		w.env = append(w.env, k+"="+hostPath(v, mounts))
	}
	return w
}

// hostPath maps a value under one of the container's mount paths to the
// directory standing in for it, once and by the longest mount path that
// holds it: the directories are temporary ones under /tmp, which may be a
// mount path too, so a second rewrite would nest them.
func hostPath(v string, mounts map[string]string) string {
	best := ""
	for mountPath := range mounts {
		if strings.HasPrefix(v, mountPath+"/") && len(mountPath) > len(best) {
			best = mountPath
		}
	}
	if best == "" {
		return v
	}
	return mounts[best] + strings.TrimPrefix(v, best)
}

// secretData decodes a Secret the chart rendered; one it only names (an
// existing Secret) fails the test.
func secretData(t *testing.T, objs rendered, name string) map[string][]byte {
	t.Helper()
	s := objs["Secret/"+name]
	if s == nil {
		t.Fatalf("Secret %s is not rendered by the chart", name)
	}
	out := map[string][]byte{}
	data, _ := s["data"].(map[string]any)
	for k, v := range data {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

// mountVolumes writes each mounted volume into a directory and returns
// mount path -> directory.
func mountVolumes(t *testing.T, objs rendered, spec, c any) map[string]string {
	t.Helper()
	volumes := map[string]any{}
	for _, v := range helmrender.Get(spec, "volumes").([]any) {
		volumes[helmrender.Get(v, "name").(string)] = v
	}
	out := map[string]string{}
	mounts, _ := helmrender.Get(c, "volumeMounts").([]any)
	for _, m := range mounts {
		v := volumes[helmrender.Get(m, "name").(string)]
		dir := t.TempDir()
		out[helmrender.Get(m, "mountPath").(string)] = dir
		var files map[string][]byte
		var items any
		switch {
		case helmrender.Get(v, "emptyDir") != nil:
			continue
		case helmrender.Get(v, "secret") != nil:
			files = secretData(t, objs, helmrender.Get(v, "secret", "secretName").(string))
			items = helmrender.Get(v, "secret", "items")
		case helmrender.Get(v, "configMap") != nil:
			name := helmrender.Get(v, "configMap", "name").(string)
			cm := objs["ConfigMap/"+name]
			if cm == nil {
				t.Fatalf("ConfigMap %s is not rendered by the chart", name)
			}
			files = map[string][]byte{}
			for k, d := range cm["data"].(map[string]any) {
				files[k] = []byte(d.(string))
			}
			items = helmrender.Get(v, "configMap", "items")
		default:
			t.Fatalf("volume %v: unknown kind", v)
		}
		paths := map[string]string{}
		if list, ok := items.([]any); ok {
			for _, it := range list {
				paths[helmrender.Get(it, "key").(string)] = helmrender.Get(it, "path").(string)
			}
		} else {
			for k := range files {
				paths[k] = k
			}
		}
		for key, path := range paths {
			b, ok := files[key]
			if !ok {
				t.Fatalf("volume %v: no key %s", v, key)
			}
			if err := os.WriteFile(filepath.Join(dir, path), b, 0o440); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// proc is one running replica.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testenv.Buffer
	done   chan error
}

// start runs w; its metrics address is the one of the manifest's port 9090.
func start(t *testing.T, bin string, w workload) *proc {
	t.Helper()
	addr := w.addrs["0.0.0.0:9090"]
	if addr == "" {
		t.Fatalf("%s: no metrics address 0.0.0.0:9090 in %v", w.name, w.env)
	}
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
// Then the API and a worker of the same release carry an order through.
func TestChartRelayPairFailsOver(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := map[string]string{"url": url, "existingSecret": "", "secretKey": "pg-url"}
	prefix, token := testenv.UniqueName("kube")+".", testenv.UniqueName("token")
	bin := binary(t)
	r, err := helmrender.Render(helmrender.Options{Chart: chartDir, Sets: []string{
		"relay.database=" + jsonValue(t, db),
		"migration.database=" + jsonValue(t, db),
		"kafka.brokers=" + jsonValue(t, strings.Join(env.Brokers, ",")),
		"relay.slot=" + jsonValue(t, testenv.UniqueName("kube")),
		"relay.env=" + jsonValue(t, map[string]string{"EVENTFORGE_TOPIC_PREFIX": prefix}),
		"workers=" + jsonValue(t, []map[string]any{{"name": "orders", "group": testenv.UniqueName("kube"),
			"topics": []string{prefix + "orders"}, "replicas": 1, "handlersFile": "orders.yaml", "database": db}}),
		"api.enabled=true",
		"api.database=" + jsonValue(t, db),
		"api.token.value=" + jsonValue(t, token),
		"migration.args=" + jsonValue(t, migrateArgs(t, bin)),
	}})
	if err != nil {
		t.Fatal(err)
	}

	job := container(t, r, "Job", "eventforge-migrate")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, job.args...)
	cmd.Env = job.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("migration Job %v: %v\n%s", job.args, err, out)
	}

	relay := container(t, r, "Deployment", "eventforge-relay")
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
	active := start(t, bin, container(t, r, "Deployment", "eventforge-relay"))
	waitFor(t, 60*time.Second, "first relay ready and streaming", func() bool {
		return ready(active) && active.gauge("eventforge_cdc_streaming") == 1
	})
	standby := start(t, bin, container(t, r, "Deployment", "eventforge-relay"))
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

	// The rest of the release: an order posted to the API (token from its
	// Secret file) reaches the worker (handlers from its ConfigMap) through
	// the relay that took over.
	apiW := container(t, r, "Deployment", "eventforge-api")
	start(t, bin, apiW)
	worker := start(t, bin, container(t, r, "Deployment", "eventforge-worker-orders"))
	apiURL := "http://" + apiW.addrs["0.0.0.0:8080"]
	var id string
	waitFor(t, 30*time.Second, "API accepts an order", func() bool {
		id = postOrder(t, apiURL, token)
		return id != ""
	})
	waitFor(t, 60*time.Second, "worker applies the order.created event", func() bool {
		return orderStatus(t, apiURL, token, id) == "processed"
	})
	t.Logf("order %s: API -> outbox -> relay (the former standby) -> Kafka -> worker: processed", id)
	if !ready(worker) {
		t.Error("the worker is not ready")
	}
}

// migrateArgs are the migration Job's args for a release with the API and
// the demo handler: with --demo when this eventforge's migrate has that flag
// (it then creates the orders tables only when asked).
func migrateArgs(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "migrate", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("eventforge migrate --help: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--demo") {
		return []string{"migrate", "--demo"}
	}
	return []string{"migrate"}
}

// postOrder creates an order and returns its id ("" when the API does not
// answer 201 yet).
func postOrder(t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"customer":"Ada","amount":1250,"currency":"EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	var out struct{ ID string }
	if doJSON(req, http.StatusCreated, &out) != nil {
		return ""
	}
	return out.ID
}

func orderStatus(t *testing.T, base, token, id string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/orders/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	var out struct{ Status string }
	if err := doJSON(req, http.StatusOK, &out); err != nil {
		t.Logf("GET order: %v", err)
	}
	return out.Status
}

func doJSON(req *http.Request, want int, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

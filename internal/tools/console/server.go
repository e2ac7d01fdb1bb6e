package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/eventforge/eventforge/internal/shared/ops"
)

//go:embed assets
var assets embed.FS

// lookupGap is the least time between the starts of two order lookups
// (each reads Kafka); lookupMaxWait is how long a lookup waits its turn.
const (
	lookupGap     = 100 * time.Millisecond
	lookupMaxWait = 2 * time.Second
	// signalsTTL is how long one read of the live signals serves every page.
	signalsTTL = 500 * time.Millisecond
)

// Handler serves the page, its static assets, the JSON endpoints and the
// server-sent events. Before any handler runs, a request must name one of
// the console's hosts and, when a token is configured, carry it. The
// scenario actions exist only in demo mode.
func (c *Console) Handler() http.Handler {
	tmpl := template.Must(template.New("").Funcs(template.FuncMap{"inc": func(i int) int { return i + 1 }}).ParseFS(assets, "assets/*.html"))
	static, _ := fs.Sub(assets, "assets")
	lookups := newLookupLimiter(lookupGap, lookupMaxWait)
	sigs := newSharedSignals(signalsTTL, func(ctx context.Context) Signals { return c.obs.signals(ctx) })
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { c.page(w, r, tmpl, "index.html", lookups) })
	mux.HandleFunc("GET /steps", func(w http.ResponseWriter, r *http.Request) { c.page(w, r, tmpl, "steps.html", lookups) })
	mux.HandleFunc("GET /api/info", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, c.Info()) })
	mux.HandleFunc("GET /api/run", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, c.Current()) })
	mux.HandleFunc("GET /api/signals", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, sigs.get(r.Context())) })
	mux.HandleFunc("GET /api/processes", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, c.Processes()) })
	mux.HandleFunc("GET /api/order", lookups.limit(c.order))
	mux.HandleFunc("GET /api/topology", c.serveTopology)
	mux.HandleFunc("GET /api/partition", lookups.limit(c.servePartition))
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { c.events(w, r, sigs) })
	if c.demo != nil {
		mux.HandleFunc("POST /steps", c.runAllSteps)
		mux.HandleFunc("POST /api/run", c.startRun)
		mux.HandleFunc("POST /api/run/next", c.next)
		mux.HandleFunc("POST /api/run/stop", c.stopRun)
	}
	inner := sameOrigin(securityHeaders(mux))
	return guardHost(newHostPolicy(c.cfg.HTTPAddr, c.cfg.AllowedHosts), guardToken(c.cfg.Token, inner))
}

// Serve serves the console on ln until ctx ends; the live-update streams
// end with it.
func (c *Console) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, c.hub.close)
	defer stop()
	return ops.ServeListener(ctx, ln, c.Handler())
}

// pageData is what the templates render.
type pageData struct {
	Info      Info
	Scenarios []ScenarioView
	Scenario  ScenarioView
	Run       RunView
	Latest    *Snapshot
	Error     string
	// Order is the order an operator looks up (?order=ID): the cards show
	// its state now instead of a run's steps.
	Order string
}

func (c *Console) page(w http.ResponseWriter, r *http.Request, tmpl *template.Template, name string, lookups *lookupLimiter) {
	sc := findScenario(r.URL.Query().Get("scenario"))
	run := c.Current()
	if sc == nil {
		sc = findScenario(run.Scenario)
	}
	if sc == nil {
		sc = scenarios()[0]
	}
	d := pageData{Info: c.Info(), Scenarios: scenarioViews(), Scenario: sc.view(), Error: r.URL.Query().Get("error")}
	if id := r.URL.Query().Get("order"); id != "" {
		d.Order = id
		if release, ok := lookups.acquire(r.Context()); !ok {
			d.Error = "too many order lookups at once; reload in a second"
		} else {
			f, cards, err := c.Order(r.Context(), id)
			release()
			if err != nil {
				d.Error = err.Error()
			}
			d.Latest = &Snapshot{Title: "Order " + id, Cards: cards, Facts: f, At: f.ReadAt,
				Evidence: []string{"read at " + f.ReadAt.Format("15:04:05.000") + " UTC from PostgreSQL and Kafka"}}
		}
	} else if run.Scenario == sc.name {
		d.Run = run
		if n := len(run.Snapshots); n > 0 {
			d.Latest = &run.Snapshots[n-1]
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := tmpl.ExecuteTemplate(w, name, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// runAllSteps is the page's form without scripts: it runs the whole
// scenario, then shows every step's recorded state.
func (c *Console) runAllSteps(w http.ResponseWriter, r *http.Request) {
	name := r.FormValue("scenario")
	q := url.Values{"scenario": {name}}
	v, err := c.RunToEnd(r.Context(), name)
	if err == nil && v.Error != "" {
		err = errors.New(v.Error)
	}
	if err != nil {
		q.Set("error", err.Error())
	}
	http.Redirect(w, r, "/steps?"+q.Encode(), http.StatusSeeOther)
}

func (c *Console) order(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "id required"})
		return
	}
	f, cards, err := c.Order(r.Context(), id)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"facts": f, "cards": cards})
}

func (c *Console) startRun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Scenario string `json:"scenario"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want JSON {\"scenario\": name}"})
		return
	}
	v, err := c.Start(r.Context(), body.Scenario)
	switch {
	case errors.Is(err, errNotDemo):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case errors.Is(err, errUnknownScenario):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func (c *Console) next(w http.ResponseWriter, r *http.Request) {
	s, err := c.Next(r.Context())
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "run": c.Current()})
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (c *Console) stopRun(w http.ResponseWriter, r *http.Request) {
	if err := c.Stop(r.Context()); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"processes": c.Processes()})
}

// events streams the run on every change and the signals and processes
// every second, as server-sent events.
func (c *Console) events(w http.ResponseWriter, r *http.Request, sigs *sharedSignals) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	msgs, cancel := c.hub.subscribe()
	defer cancel()
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		fl.Flush()
		return err == nil
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	live := func() bool {
		return send("signals", sigs.get(r.Context())) && send("processes", c.Processes())
	}
	if !send("run", c.Current()) || !live() {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.event, m.data); err != nil {
				return
			}
			fl.Flush()
		case <-tick.C:
			if !live() {
				return
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// securityHeaders keeps the page to its own assets: no CDN, no inline script.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// sameOrigin refuses state-changing requests from other sites' pages.
func sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if o := r.Header.Get("Origin"); o != "" {
				u, err := url.Parse(o)
				if err != nil || u.Host != r.Host {
					http.Error(w, "cross-origin request refused", http.StatusForbidden)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// Package internal_test holds the module's import rule: packages live on
// floors, and non-test code imports only from its own floor or below. The
// floors and the rule are drawn in docs/architecture.md.
package internal_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/eventforge/eventforge"

// floor is a level of the house; a package imports only from its own floor
// or a lower one.
type floor int

const (
	library     floor = iota // what the product is built on
	product                  // relay, worker, API
	tool                     // bench, console, chaos
	program                  // cmd/*
	testSupport              // imported only by _test files and tools
)

var floorNames = map[floor]string{
	library: "library", product: "product", tool: "tool", program: "program", testSupport: "test support",
}

// floorRules places every package of the module, by path relative to the
// module and its subpackages; the longest matching prefix wins. A package no
// rule places fails the test: a new package must be given a floor here.
var floorRules = []struct {
	prefix string
	floor  floor
}{
	{"internal/shared", library},
	{"sql", library},
	{"deploy/prometheus", library}, // Prometheus configuration; only tests
	{"cdc/pgoutput", library},
	{"cdc/ack", library},
	{"cdc/position", library},
	{"cdc/produce", library},
	{"cdc/outboxscan", library},
	{"cdc/setaside", library},
	{"cdc/topics", library},
	{"cdc/backfill", library},
	{"cdc/eos", library},
	{"cdc", product},
	{"worker", product},
	{"api", product},
	{"internal/tools/bench", tool},
	{"internal/tools/console", tool},
	{"internal/tools/chaos", tool},
	{"cmd", program},
	{"internal/testsupport", testSupport},
}

// place is where a package lives: its floor and, on the product and tool
// floors, its wing (the rule that placed it: cdc, worker, api, or one tool).
type place struct {
	floor floor
	wing  string
}

// placeOf returns the place of a module-relative package path.
func placeOf(rel string) (place, bool) {
	best, found, p := -1, false, place{}
	for _, r := range floorRules {
		if (rel == r.prefix || strings.HasPrefix(rel, r.prefix+"/")) && len(r.prefix) > best {
			best, found, p = len(r.prefix), true, place{floor: r.floor, wing: r.prefix}
		}
	}
	return p, found
}

// allowed reports whether non-test code at from may import a package at to.
// Floors: down or level only. Wings of the product and tool floors stand
// side by side: the relay, the worker and the API do not import one another,
// nor do the tools.
func allowed(from, to place) bool {
	switch {
	case to.floor == testSupport:
		return from.floor == tool || from.floor == testSupport
	case from.floor == testSupport:
		return to.floor == library
	case from.floor == to.floor && (from.floor == product || from.floor == tool):
		return from.wing == to.wing
	default:
		return to.floor <= from.floor
	}
}

// violations checks a module-relative import graph (package → its non-test
// imports inside the module) and returns one line per broken rule, sorted.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		from, ok := placeOf(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no floor; place it in floorRules and docs/architecture.md", pkg))
			continue
		}
		for _, imp := range imports {
			to, ok := placeOf(imp)
			if ok && !allowed(from, to) {
				out = append(out, fmt.Sprintf("%s (%s %s) imports %s (%s %s)", pkg, floorNames[from.floor], from.wing, imp, floorNames[to.floor], to.wing))
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestImportsKeepToTheirFloor(t *testing.T) {
	graph, _ := moduleGraph(t)
	if len(graph) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(graph))
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// moduleGraph lists the module's packages and their non-test imports inside
// the module, by module-relative path, and the non-test Go files of each.
func moduleGraph(t *testing.T) (graph, files map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} {{join .GoFiles ","}}, {{join .Imports " "}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph, files = map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module+"/")
		if fields[2] == "," {
			continue // only _test.go files: no non-test imports to check
		}
		graph[pkg] = nil
		for _, f := range strings.Split(strings.TrimSuffix(fields[2], ","), ",") {
			if f != "" {
				files[pkg] = append(files[pkg], filepath.Join(fields[1], f))
			}
		}
		for _, imp := range fields[3:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return graph, files
}

// TestPackageDocsSayWhatTheyMayImport holds every package with Go code to a
// doc comment that says, besides what the package owns, its floor and what
// it may import ("Imports (floor: ...): ...").
func TestPackageDocsSayWhatTheyMayImport(t *testing.T) {
	_, files := moduleGraph(t)
	for pkg, paths := range files {
		doc := packageDoc(t, paths)
		switch {
		case doc == "":
			t.Errorf("%s: no package doc comment", pkg)
		case !strings.Contains(doc, "Imports ("):
			t.Errorf("%s: the package doc comment does not say what it may import (\"Imports (floor: ...): ...\")", pkg)
		}
	}
}

// packageDoc returns the package doc comments of the given files, joined.
func packageDoc(t *testing.T, paths []string) string {
	t.Helper()
	var docs []string
	fset := token.NewFileSet()
	for _, path := range paths {
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			docs = append(docs, f.Doc.Text())
		}
	}
	return strings.Join(docs, "\n")
}

func TestFloorRuleCatchesWrongImports(t *testing.T) {
	tests := []struct {
		name    string
		graph   map[string][]string
		wantBad int
	}{
		{"library down to library", map[string][]string{"internal/shared/prune": {"internal/shared/outbox", "internal/shared/slots"}}, 0},
		{"product down to library", map[string][]string{"cdc": {"cdc/produce", "internal/shared/kafka"}}, 0},
		{"product across the floor", map[string][]string{"worker/sqlhandler": {"worker"}}, 0},
		{"relay takes from the worker's wing", map[string][]string{"cdc": {"worker/kafkaconf"}}, 1},
		{"api takes from the relay's wing", map[string][]string{"api": {"cdc"}}, 1},
		{"tool takes from another tool", map[string][]string{"internal/tools/console": {"internal/tools/bench"}}, 1},
		{"tool down to product", map[string][]string{"internal/tools/bench": {"cdc", "internal/shared/outbox"}}, 0},
		{"library up to product", map[string][]string{"cdc/produce": {"cdc"}}, 1},
		{"backfill up to the relay it serves", map[string][]string{"cdc/backfill": {"cdc", "cdc/ack", "cdc/outboxscan"}}, 1},
		{"library up to product elsewhere", map[string][]string{"internal/shared/kafka": {"worker/kafkaconf"}}, 1},
		{"product up to tool", map[string][]string{"worker": {"internal/tools/bench"}}, 1},
		{"tool up to program", map[string][]string{"internal/tools/chaos": {"cmd/eventforge"}}, 1},
		{"product uses test support", map[string][]string{"cdc": {"internal/testsupport/testenv"}}, 1},
		{"tool uses test support", map[string][]string{"internal/tools/bench": {"internal/testsupport/slotstest"}}, 0},
		{"program uses test support", map[string][]string{"cmd/eventforge": {"internal/testsupport/testenv"}}, 1},
		{"test support up to product", map[string][]string{"internal/testsupport/testenv": {"worker"}}, 1},
		{"package without a floor", map[string][]string{"newtop/thing": nil}, 1},
		{"package directly under internal/", map[string][]string{"internal/newthing": nil}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := violations(tt.graph); len(got) != tt.wantBad {
				t.Errorf("violations = %q, want %d", got, tt.wantBad)
			}
		})
	}
}

// treeEntries returns the folders drawn in docs/architecture.md between
// the layout markers, as module-relative paths: each "name/" line is a
// child of the nearest line above it indented two spaces less.
func treeEntries(t *testing.T, doc string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- layout:begin")
	block, _, ok2 := strings.Cut(rest, "<!-- layout:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md: no <!-- layout:begin --> ... <!-- layout:end --> block")
	}
	_, block, _ = strings.Cut(block, "```text\n")
	block, _, _ = strings.Cut(block, "```")
	var stack, out []string
	for _, line := range strings.Split(block, "\n") {
		name := strings.TrimLeft(line, " ")
		if name == "" {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		depth := (len(line) - len(strings.TrimLeft(line, " "))) / 2
		if !strings.HasSuffix(name, "/") || depth > len(stack) {
			t.Fatalf("docs/architecture.md tree: cannot place %q", line)
		}
		stack = append(stack[:depth], strings.TrimSuffix(name, "/"))
		out = append(out, strings.Join(stack, "/"))
	}
	return out
}

// TestArchitectureTreeMatchesTheCode holds the tree drawn in
// docs/architecture.md to the module: every package is drawn, and every
// folder drawn exists.
func TestArchitectureTreeMatchesTheCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[string]bool{}
	for _, e := range treeEntries(t, string(doc)) {
		drawn[e] = true
		if st, err := os.Stat(filepath.Join("..", e)); err != nil || !st.IsDir() {
			t.Errorf("docs/architecture.md draws %s/, which is not a folder of the module", e)
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, module+"/")
		if rel != pkg && rel != "internal" && !drawn[rel] {
			t.Errorf("docs/architecture.md does not draw the package %s/ in its tree", rel)
		}
	}
}

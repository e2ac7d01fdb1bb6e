package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFitsOnAScreen keeps README.md short enough to read through:
// what EventForge is, the two set-up commands, a tour and the map of docs/.
// Long explanations belong in docs/.
func TestReadmeFitsOnAScreen(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, more than 250: move the details to a page of docs/", n)
	}
	for _, want := range []string{"make demo", "make test", "docs/README.md"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}

// TestDocsIndexListsEveryPage keeps docs/README.md a complete map: every
// page of docs/ is linked from it, and every page it links exists.
func TestDocsIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([a-z0-9-]+\.md)[)#]`).FindAllStringSubmatch(string(index), -1) {
		linked[m[1]] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, p := range pages {
		name := filepath.Base(p)
		exists[name] = true
		if name != "README.md" && !linked[name] {
			t.Errorf("docs/README.md does not list docs/%s", name)
		}
	}
	for name := range linked {
		if !exists[name] {
			t.Errorf("docs/README.md links to docs/%s, which does not exist", name)
		}
	}
}

// TestDocLinksResolve checks every relative link of README.md and docs/*.md:
// the file exists and, for a Markdown file, the #anchor names one of its
// headings (or an <a id> in it). Moving a section between pages breaks no
// link unnoticed.
func TestDocLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md", "../../SECURITY.md")
	link := regexp.MustCompile(`\]\(([^)\s]*)\)`)
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripFences(string(b)), -1) {
			target := m[1]
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			checked++
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: no such file", page, target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			doc, _ := os.ReadFile(path)
			if !markdownAnchors(string(doc))[anchor] {
				t.Errorf("%s links to %s: %s has no such heading", page, target, file)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links found: is the pattern right?", checked)
	}
}

var fenceBlock = regexp.MustCompile("(?s)```.*?```")

// stripFences drops fenced code blocks, whose brackets are not links.
func stripFences(s string) string { return fenceBlock.ReplaceAllString(s, "") }

// markdownAnchors returns the anchors GitHub gives a page's headings, and
// its explicit <a id="..."> anchors.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)"`).FindAllStringSubmatch(doc, -1) {
		out[m[1]] = true
	}
	seen := map[string]int{}
	for _, line := range strings.Split(stripFences(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r > 127 && r != '—' && r != '–' && r != '…' && r != '→':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		}
		seen[a]++
		out[a] = true
	}
	return out
}

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCitationsStayInTheRepository keeps code and docs self-contained: no
// citation of documents a clone does not have (external rule lists, issue
// numbers), and every docs/design.md#anchor cited names an anchor that
// docs/design.md defines.
func TestCitationsStayInTheRepository(t *testing.T) {
	t.Parallel()
	root := "../.."
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([a-z0-9-]+)"></a>`).FindAllStringSubmatch(string(design), -1) {
		anchors[m[1]] = true
	}
	external := regexp.MustCompile(`CDC` + `-RULES|[Ii]ssue [0-9]+`) // split: this line must not match itself
	// A citation names the file, then one or more anchors: "#a, #b".
	cited := regexp.MustCompile(`design\.md((?:,? ?#[a-z0-9-]+)+)`)
	anchor := regexp.MustCompile(`#([a-z0-9-]+)`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == ".git" || name == ".eventforge" || name == "node_modules" || name == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") && !strings.HasSuffix(name, ".sql") &&
			!strings.HasSuffix(name, ".sh") && name != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join("cmd", "eventforge", "citations_test.go") {
			return nil // the patterns themselves
		}
		for i, line := range strings.Split(string(b), "\n") {
			if external.MatchString(line) {
				t.Errorf("%s:%d cites a document outside the repository: %s", rel, i+1, strings.TrimSpace(line))
			}
			for _, c := range cited.FindAllStringSubmatch(line, -1) {
				for _, a := range anchor.FindAllStringSubmatch(c[1], -1) {
					if !anchors[a[1]] {
						t.Errorf("%s:%d cites docs/design.md#%s, which design.md does not define", rel, i+1, a[1])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

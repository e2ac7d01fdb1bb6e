package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDebeziumDocNamesRealTests keeps docs/debezium.md's proofs honest:
// every test it names as the proof of a claim exists in the module.
func TestDebeziumDocNamesRealTests(t *testing.T) {
	root := "../.."
	doc, err := os.ReadFile(filepath.Join(root, "docs", "debezium.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		named[m[1]] = true
	}
	if len(named) < 15 {
		t.Fatalf("docs/debezium.md names %d tests", len(named))
	}
	defined, err := definedTests(root)
	if err != nil {
		t.Fatal(err)
	}
	for name := range named {
		if !defined[name] {
			t.Errorf("docs/debezium.md names %s, which no test file defines", name)
		}
	}
}

// definedTests are the names of the test functions of the module's test
// files.
func definedTests(root string) (map[string]bool, error) {
	defined := map[string]bool{}
	def := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == ".eventforge" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return err
	})
	return defined, err
}

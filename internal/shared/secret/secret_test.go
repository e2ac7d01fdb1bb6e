package secret

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		open bool
	}{{0o600, false}, {0o400, false}, {0o644, true}, {0o640, true}, {0o604, true}, {0o660, true}} {
		p := filepath.Join(dir, tt.mode.String())
		if err := os.WriteFile(p, []byte("s"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		err := CheckFile(p)
		if got := errors.Is(err, ErrFileTooOpen); got != tt.open {
			t.Errorf("mode %04o: CheckFile = %v, want too open %v", tt.mode, err, tt.open)
		}
	}
	if err := CheckFile(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing file: %v (the read reports it)", err)
	}
}

func TestFileCheckerWarnsOnceOrRefuses(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c := FileChecker{Log: slog.New(slog.NewTextHandler(&buf, nil))}
	if err := c.Check(map[string]string{"api-token-file": p, "other": ""}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "--api-token-file") || !strings.Contains(buf.String(), "0644") {
		t.Fatalf("warning %q", buf.String())
	}
	c.Strict = true
	if err := c.Check(map[string]string{"api-token-file": p}); !errors.Is(err, ErrFileTooOpen) || !strings.Contains(err.Error(), "--api-token-file") {
		t.Fatalf("strict: %v", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "localhost:1": true, "[::1]:8080": true, "127.1.2.3:9": true,
		":8080": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if got := LoopbackOnly(addr); got != want {
			t.Errorf("LoopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestTokenNeverPrints(t *testing.T) {
	tok := Token("a-secret-token-0123456789")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "token", tok)
	if strings.Contains(buf.String(), string(tok)) || tok.String() != redacted {
		t.Fatalf("token printed: %s", buf.String())
	}
	if !tok.Matches(string(tok)) || tok.Matches("a-secret-token-012345678") {
		t.Fatal("Matches")
	}
}

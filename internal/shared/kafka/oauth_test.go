package kafka

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jwt is an unsigned token with the given exp claim (seconds).
func jwt(exp int64) string {
	payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"sub":"relay","exp":%d}`, exp))
	return "eyJhbGciOiJub25lIn0." + payload + "."
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFileTokenIsReadEveryTime: a token file rewritten by an agent is
// picked up at the next call; an expired JWT is refused with a clear error.
func TestFileTokenIsReadEveryTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, "first\n")
	p := (&SASLConfig{Mechanism: MechanismOAuthBearer, OAuthTokenFile: path}).tokenProvider()
	for _, want := range []string{"first", "second"} {
		writeFile(t, path, want+"\n")
		tok, err := p.Token()
		if err != nil || tok.Token != want {
			t.Fatalf("Token() = %v, %v; want %q", tok, err, want)
		}
	}
	writeFile(t, path, jwt(time.Now().Add(-time.Minute).Unix()))
	if _, err := p.Token(); !errors.Is(err, ErrTokenExpired) || !strings.Contains(err.Error(), "token file "+path+" expired at") {
		t.Errorf("expired token: %v, want ErrTokenExpired naming the file", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Token(); err == nil || !strings.Contains(err.Error(), "get kafka OAUTHBEARER token from token file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestCommandTokenRefreshesBeforeExpiry: a JWT from the command is reused
// until a fifth of its life is left, then the command runs again; an
// opaque token is fetched on every call.
func TestCommandTokenRefreshesBeforeExpiry(t *testing.T) {
	dir := t.TempDir()
	tokenFile, runs := filepath.Join(dir, "token"), filepath.Join(dir, "runs")
	start := time.Unix(1_800_000_000, 0)
	writeFile(t, tokenFile, jwt(start.Add(100*time.Second).Unix()))
	cmd := fmt.Sprintf("echo run >> %s; cat %s", runs, tokenFile)
	p := newTokenProvider("test", commandToken(cmd), true)
	now := start
	p.now = func() time.Time { return now }
	count := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}
	for _, step := range []struct {
		at   time.Duration
		runs int
	}{{0, 1}, {10 * time.Second, 1}, {79 * time.Second, 1}, {81 * time.Second, 2}} {
		now = start.Add(step.at)
		if step.runs == 2 {
			writeFile(t, tokenFile, jwt(now.Add(100*time.Second).Unix()))
		}
		if _, err := p.Token(); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != step.runs {
			t.Errorf("at +%v: command ran %d times, want %d", step.at, got, step.runs)
		}
	}
	writeFile(t, tokenFile, "opaque-token")
	p = newTokenProvider("test", commandToken(cmd), true)
	before := count()
	for range 2 {
		if tok, err := p.Token(); err != nil || tok.Token != "opaque-token" {
			t.Fatalf("opaque: %v %v", tok, err)
		}
	}
	if got := count() - before; got != 2 {
		t.Errorf("opaque token: command ran %d times for 2 calls, want 2", got)
	}
}

// TestCommandTokenFailure: a failing command's error holds its stderr, not
// its stdout (which may be a token).
func TestCommandTokenFailure(t *testing.T) {
	p := (&SASLConfig{Mechanism: MechanismOAuthBearer, OAuthTokenCommand: "echo secret-token; echo 'login required' >&2; exit 3"}).tokenProvider()
	_, err := p.Token()
	if err == nil || !strings.Contains(err.Error(), "exit status 3: login required") || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("error %v, want the exit status and stderr without stdout", err)
	}
	p = (&SASLConfig{Mechanism: MechanismOAuthBearer, OAuthTokenCommand: "true"}).tokenProvider()
	if _, err := p.Token(); err == nil || !strings.Contains(err.Error(), "empty token") {
		t.Errorf("empty output: %v", err)
	}
}

func TestJWTExpiry(t *testing.T) {
	for _, tt := range []struct {
		tok  string
		want int64
	}{
		{jwt(1_900_000_000), 1_900_000_000},
		{"opaque", 0},
		{"a.b.c", 0},
		{"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + ".", 0},
		{"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":"soon"}`)) + ".", 0},
		{"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":1e300}`)) + ".", 0},
		{"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":-5}`)) + ".", 0},
		{"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":0.5}`)) + ".", 0},
	} {
		got := jwtExpiry(tt.tok)
		if (tt.want == 0) != got.IsZero() || (tt.want != 0 && got.Unix() != tt.want) {
			t.Errorf("jwtExpiry(%q) = %v, want %d", tt.tok, got, tt.want)
		}
	}
}

// FuzzJWTExpiry: any token, however malformed, gives no expiry or one
// after 1970 that round-trips through its exp claim's seconds.
func FuzzJWTExpiry(f *testing.F) {
	f.Add(jwt(1_900_000_000))
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.eyJleHAiOjEuNWUxMH0.")
	f.Fuzz(func(t *testing.T, tok string) {
		got := jwtExpiry(tok)
		if !got.IsZero() && (got.Unix() <= 0 || float64(got.Unix()) > maxExp) {
			t.Fatalf("jwtExpiry(%q) = %v, out of range", tok, got)
		}
	})
}

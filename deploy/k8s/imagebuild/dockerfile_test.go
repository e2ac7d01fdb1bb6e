package imagebuild

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileMatchesImage: the Dockerfile (for users with Docker) makes
// the image Build makes: from scratch, the same user, entrypoint, working
// directory, passwd entry and label keys.
func TestDockerfileMatchesImage(t *testing.T) {
	b, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{
		"\nFROM scratch\n",
		"\nUSER 65532:65532\n",
		`ENTRYPOINT ["` + Entrypoint + `"]`,
		"\nWORKDIR " + Home + "\n",
		"SSL_CERT_FILE=" + DefaultCACerts,
	} {
		if !strings.Contains(final, want) {
			t.Errorf("final stage of the Dockerfile lacks %q", strings.TrimSpace(want))
		}
	}
	if !strings.Contains(df, "nonroot:x:65532:65532:nonroot:"+Home+":/sbin/nologin") {
		t.Error("the Dockerfile's passwd differs from the image's")
	}
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)=`).FindAllStringSubmatch(final, -1) {
		got[m[1]] = true
	}
	for k := range (Config{}).Labels() {
		if k == "org.opencontainers.image.created" {
			continue // set by docker build itself
		}
		if !got[k] {
			t.Errorf("the Dockerfile lacks label %s", k)
		}
	}
}

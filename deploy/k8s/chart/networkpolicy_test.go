package chart

import (
	"strings"
	"testing"
)

// TestNetworkPolicyByDefault: by default ingress to every pod of the release
// is limited to the metrics scrapers on the metrics port, and the API's port
// to its labelled clients; disabled, no policy renders and NOTES says so.
func TestNetworkPolicyByDefault(t *testing.T) {
	r := render(t, nil, `api.enabled=true`, `api.token.value="token-0123456789abcdef"`)
	all := r.find(t, "NetworkPolicy", "eventforge")
	if get(all, "spec", "podSelector", "matchLabels", "app.kubernetes.io/instance") != "eventforge" ||
		get(all, "spec", "policyTypes", 0) != "Ingress" {
		t.Errorf("release policy %v", all["spec"])
	}
	if get(all, "spec", "ingress", 0, "ports", 0, "port") != "metrics" ||
		get(all, "spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "app.kubernetes.io/name") != "prometheus" {
		t.Errorf("release policy ingress %v", get(all, "spec", "ingress"))
	}
	if n := len(get(all, "spec", "ingress").([]any)); n != 1 {
		t.Errorf("release policy has %d ingress rules, want only the scrapers'", n)
	}
	api := r.find(t, "NetworkPolicy", "eventforge-api")
	if get(api, "spec", "podSelector", "matchLabels", "app.kubernetes.io/component") != "api" ||
		get(api, "spec", "ingress", 0, "ports", 0, "port") != "http" ||
		get(api, "spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "eventforge.dev/api-client") != "true" {
		t.Errorf("API policy %v", api["spec"])
	}
	if strings.Contains(r.notes, "WARNING") {
		t.Errorf("NOTES warn with a token and policies:\n%s", r.notes)
	}

	off := render(t, nil, `networkPolicy.enabled=false`)
	if ps := off.ofKind("NetworkPolicy"); len(ps) != 0 {
		t.Errorf("%d NetworkPolicies with networkPolicy.enabled=false", len(ps))
	}
	if !strings.Contains(off.notes, "WARNING: networkPolicy is disabled") {
		t.Errorf("NOTES without policies:\n%s", off.notes)
	}
}

// TestNotesWarnAboutAnAPIWithoutToken: an API without a token renders, with
// a warning in NOTES; the hardened example (a token Secret) has none.
func TestNotesWarnAboutAnAPIWithoutToken(t *testing.T) {
	r := render(t, nil, `api.enabled=true`)
	if !strings.Contains(r.notes, "WARNING: the API has no token") {
		t.Errorf("NOTES of an API without a token:\n%s", r.notes)
	}
	if h := render(t, []string{hardenedValues}); strings.Contains(h.notes, "no token") {
		t.Errorf("NOTES of the hardened example:\n%s", h.notes)
	}
}

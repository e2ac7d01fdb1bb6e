package privileges

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestDecideReplication: the replication connection's answer is final when
// it gives one; only when it gives none does the catalog's answer stand.
func TestDecideReplication(t *testing.T) {
	need := Need{Kind: Replication, Why: "to read the slot"}
	attr := replicationGrant{attribute: true}
	member := replicationGrant{via: []string{"rds_replication"}}
	none := replicationGrant{}
	perr := errors.New("server said something")
	tests := []struct {
		name    string
		grant   replicationGrant
		probe   probe
		missing string // part of the missing Need's Why; "" none
		err     string // part of the error; "" none
	}{
		{"attribute, accepted", attr, probeAccepted, "", ""},
		{"member, accepted (RDS)", member, probeAccepted, "", ""},
		{"none, accepted (a provider's own mechanism)", none, probeAccepted, "", ""},
		{"attribute, refused", attr, probeRefused, "to read the slot", ""},
		{"member, refused", member, probeRefused, "member of rds_replication, but this server refused", ""},
		{"none, refused", none, probeRefused, "to read the slot", ""},
		{"member, authentication refuses", member, probeNotAllowed, "", "refused role \"relay\" a replication connection"},
		{"attribute, inconclusive", attr, probeInconclusive, "", ""},
		{"member, inconclusive", member, probeInconclusive, "", ""},
		{"none, inconclusive", none, probeInconclusive, "to read the slot", ""},
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decideReplication("relay", need, tt.grant, tt.probe, perr, log)
			if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("error %v, want one holding %q", err, tt.err)
			}
			if (tt.missing == "") != (got == nil) || (got != nil && !strings.Contains(got.Why, tt.missing)) {
				t.Errorf("missing %+v, want one holding %q", got, tt.missing)
			}
		})
	}
}

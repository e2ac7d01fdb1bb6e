package main

import (
	"slices"
	"testing"
)

func TestReplicationCheckFlags(t *testing.T) {
	for _, tt := range []struct {
		f           replicationCheckFlags
		roles       []string
		catalogOnly bool
		bad         bool
	}{
		{replicationCheckFlags{roles: []string{"rds_replication"}, mode: "connect"}, []string{"rds_replication"}, false, false},
		{replicationCheckFlags{roles: []string{"a", "b"}, mode: "catalog"}, []string{"a", "b"}, true, false},
		{replicationCheckFlags{mode: "connect"}, []string{}, false, false},
		{replicationCheckFlags{mode: "sometimes"}, nil, false, true},
	} {
		c, err := tt.f.check()
		if tt.bad {
			if err == nil {
				t.Errorf("%+v: no error", tt.f)
			}
			continue
		}
		if err != nil || !slices.Equal(c.Roles, tt.roles) || c.Roles == nil || c.CatalogOnly != tt.catalogOnly {
			t.Errorf("%+v: %+v %v, want roles %v catalog only %v", tt.f, c, err, tt.roles, tt.catalogOnly)
		}
	}
}

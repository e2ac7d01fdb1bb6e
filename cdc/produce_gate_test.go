package cdc

import (
	"slices"
	"testing"
)

// TestKeyGate drives the gate through admissions, sends and settlements and
// checks what is released when.
func TestKeyGate(t *testing.T) {
	type step struct {
		op   string // admit, send, settle, resend
		id   string // record: key "/" n
		want []string
	}
	recs := map[string]*pending{}
	rec := func(id string) *pending {
		if p, ok := recs[id]; ok {
			return p
		}
		p := &pending{key: id[:1]}
		recs[id] = p
		return p
	}
	name := func(p *pending) string {
		for id, q := range recs {
			if q == p {
				return id
			}
		}
		return "?"
	}
	steps := []step{
		{"admit", "a1", []string{"a1"}},
		{"admit", "a2", []string{"a1"}}, // behind a1
		{"admit", "b1", []string{"a1", "b1"}},
		{"send", "", []string{"b1"}},
		{"send", "", nil},
		{"admit", "a3", nil},
		{"settle", "b1", nil},            // b has nothing queued
		{"resend", "a1", []string{"a1"}}, // a retry in place keeps a busy
		{"send", "", nil},
		{"settle", "a1", []string{"a2"}}, // only the next of a
		{"send", "", nil},
		{"settle", "a2", []string{"a3"}},
		{"admit", "b2", []string{"a3", "b2"}},
	}
	g := newKeyGate()
	for i, s := range steps {
		switch s.op {
		case "admit":
			g.admit(rec(s.id))
		case "send":
			g.sent()
		case "settle":
			g.settled(rec(s.id))
		case "resend":
			g.resend(rec(s.id))
		}
		var got []string
		for _, p := range g.ready {
			got = append(got, name(p))
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d %s %s: ready %v, want %v", i, s.op, s.id, got, s.want)
		}
	}
	g.sent()
	g.sent()
	g.settled(rec("a3"))
	g.settled(rec("b2"))
	if g.busy() != 0 || g.next() != nil {
		t.Fatalf("gate not empty: %d busy keys", g.busy())
	}
}

package cdc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFirstAnswer: one broker that answers is enough, however long a frozen
// one holds its request; with none answering, every error is returned.
func TestFirstAnswer(t *testing.T) {
	frozen := make(chan struct{})
	defer close(frozen)
	for _, tc := range []struct {
		name    string
		ask     func(i int) error
		wantErr string
	}{
		{name: "first frozen, second answers", ask: func(i int) error {
			if i == 0 {
				<-frozen
				return errors.New("read timeout")
			}
			return nil
		}},
		{name: "last answers", ask: func(i int) error {
			if i < 2 {
				return errors.New("refused")
			}
			return nil
		}},
		{name: "none answers", ask: func(i int) error { return errors.New("refused") }, wantErr: "refused\nrefused\nrefused"},
	} {
		done := make(chan error, 1)
		go func() { done <- firstAnswer(3, tc.ask) }()
		select {
		case err := <-done:
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s: %v", tc.name, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.wantErr)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: a frozen broker held the probe", tc.name)
		}
	}
}

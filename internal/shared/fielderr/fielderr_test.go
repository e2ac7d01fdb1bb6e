package fielderr

import (
	"errors"
	"io/fs"
	"testing"
)

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{New("Config.Group", "required"), "Config.Group: required"},
		{New("", "Config.A and Config.B exclude each other"), "Config.A and Config.B exclude each other"},
		{Wrap("Config.Kafka", errors.New("no brokers")), "Config.Kafka: no brokers"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	if Wrap("Config.X", nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
	if err := Wrap("Config.File", fs.ErrNotExist); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Wrap loses its cause")
	}
}

// TestRename maps fields to flags in Field and Problem, keeps joins one per
// line, leaves unmapped fields and other errors alone, and drops a field
// mapped to "".
func TestRename(t *testing.T) {
	names := map[string]string{"Config.Group": "--group", "Config.MaxBackoff": "--max-backoff",
		"Config.RetryBackoff": "--retry-backoff", "Config.Kafka": ""}
	err := errors.Join(
		New("Config.Group", "required"),
		New("Config.MaxBackoff", "1s is below Config.RetryBackoff 2s"),
		New("Config.Hidden", "must be positive"),
		New("", "Config.Group and Config.GroupX differ"),
		Wrap("Config.Kafka", errors.New("no Kafka brokers: set --kafka-brokers")),
		errors.New("plain error"),
	)
	want := "--group: required\n--max-backoff: 1s is below --retry-backoff 2s\nConfig.Hidden: must be positive\n" +
		"--group and Config.GroupX differ\nno Kafka brokers: set --kafka-brokers\nplain error"
	if got := Rename(err, names).Error(); got != want {
		t.Errorf("Rename =\n%s\nwant\n%s", got, want)
	}
	if Rename(nil, names) != nil {
		t.Error("Rename of nil is not nil")
	}
}

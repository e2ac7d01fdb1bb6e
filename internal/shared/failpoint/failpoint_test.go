package failpoint

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec, want string // want: String() of the result, or "" for nil
		err        bool
	}{
		{spec: "", want: ""},
		{spec: "  ", want: ""},
		{spec: "cdc/after-confirm=crash", want: "cdc/after-confirm=crash"},
		{spec: " cdc/after-confirm = crash ;", want: "cdc/after-confirm=crash"},
		{spec: "cdc/mid-transaction=crash-after=2500;worker/after-commit-before-offset=stall", want: "cdc/mid-transaction=crash-after=2500;worker/after-commit-before-offset=stall"},
		{spec: "worker/inside-tx-before-commit=stall-after=3", want: "worker/inside-tx-before-commit=stall-after=3"},
		{spec: "cdc/eos-before-kafka-commit=pause-after=2", want: "cdc/eos-before-kafka-commit=pause-after=2"},
		{spec: "cdc/after-confirm=crash-after=1", want: "cdc/after-confirm=crash"},
		{spec: "cdc/after-confirm=off", want: "cdc/after-confirm=off"},
		{spec: "cdc/after-confirm", err: true},
		{spec: "cdc/after-confirmed=crash", err: true},
		{spec: "cdc/after-confirm=explode", err: true},
		{spec: "cdc/after-confirm=crash-after=0", err: true},
		{spec: "cdc/after-confirm=crash-after=-2", err: true},
		{spec: "cdc/after-confirm=crash-after=x", err: true},
		{spec: "cdc/after-confirm=off-after=2", err: true},
		{spec: "cdc/after-confirm=crash;cdc/after-confirm=stall", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec)
			if tt.err {
				if !errors.Is(err, ErrSpec) {
					t.Fatalf("Parse(%q) = %v, want ErrSpec", tt.spec, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.String(); got != tt.want {
				t.Fatalf("Parse(%q) = %q, want %q", tt.spec, got, tt.want)
			}
		})
	}
}

func TestUnknownPointNamesTheKnownOnes(t *testing.T) {
	_, err := Parse("cdc/typo=crash")
	if err == nil || !strings.Contains(err.Error(), CDCAfterAckBeforeConfirm) {
		t.Fatalf("error %v does not list the known points", err)
	}
}

// TestFiresOnTheNthHit counts hits per point and fires once, on the
// configured hit, and only the points that are set.
func TestFiresOnTheNthHit(t *testing.T) {
	s, err := Parse("cdc/mid-transaction=crash-after=3;cdc/after-confirm=stall;worker/inside-tx-before-commit=off")
	if err != nil {
		t.Fatal(err)
	}
	var fired []string
	s.fire = func(name string, a action) { fired = append(fired, name+":"+a.String()) }
	for range 5 {
		s.hit(CDCMidTransaction)
		s.hit(WorkerInsideTxBeforeCommit)
		s.hit(WorkerAfterCommitBeforeOffset)
	}
	if len(fired) != 1 || fired[0] != "cdc/mid-transaction:crash" {
		t.Fatalf("after 5 hits fired %v, want [cdc/mid-transaction:crash] once", fired)
	}
	s.hit(CDCAfterConfirm)
	if len(fired) != 2 || fired[1] != "cdc/after-confirm:stall" {
		t.Fatalf("fired %v, want the stall on the first hit", fired)
	}
}

func TestHitIsFreeWhenOff(t *testing.T) {
	if err := Setup(""); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { Hit(CDCAfterConfirm) }); n != 0 {
		t.Fatalf("Hit allocates %v times when off", n)
	}
	s, err := Parse("cdc/after-confirm=crash-after=1000000000")
	if err != nil {
		t.Fatal(err)
	}
	active.Store(s)
	defer active.Store(nil)
	if n := testing.AllocsPerRun(1000, func() { Hit(CDCAfterConfirm); Hit(CDCMidTransaction) }); n != 0 {
		t.Fatalf("Hit allocates %v times when on", n)
	}
}

func BenchmarkHitOff(b *testing.B) {
	active.Store(nil)
	for b.Loop() {
		Hit(CDCAfterAckBeforeConfirm)
	}
}

func BenchmarkHitOtherPointOn(b *testing.B) {
	s, err := Parse("worker/after-commit-before-offset=crash")
	if err != nil {
		b.Fatal(err)
	}
	active.Store(s)
	defer active.Store(nil)
	for b.Loop() {
		Hit(CDCAfterAckBeforeConfirm)
	}
}

// helperEnv makes the test binary act as a process that sets its points up
// from the environment and hits cdc/after-confirm three times.
const helperEnv = "EVENTFORGE_FAILPOINT_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		if err := Setup(os.Getenv(EnvVar)); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		defer os.Stdout.WriteString("deferred cleanup ran\n")
		for i := 1; i <= 3; i++ {
			os.Stdout.WriteString("hit " + string(rune('0'+i)) + "\n")
			Hit(CDCAfterConfirm)
		}
		os.Stdout.WriteString("survived\n")
		return
	}
	os.Exit(m.Run())
}

func helper(t *testing.T, spec string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvVar+"="+spec)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out), stderr
}

func lines(sc *bufio.Scanner) []string {
	var l []string
	for sc.Scan() {
		l = append(l, sc.Text())
	}
	return l
}

// TestCrashIsSIGKILL runs a real process: it must die by SIGKILL on the
// configured hit, without running deferred code.
func TestCrashIsSIGKILL(t *testing.T) {
	tests := []struct {
		spec string
		want []string
	}{
		{"cdc/after-confirm=crash", []string{"hit 1"}},
		{"cdc/after-confirm=crash-after=2", []string{"hit 1", "hit 2"}},
		{"cdc/after-confirm=crash-after=4", []string{"hit 1", "hit 2", "hit 3", "survived", "deferred cleanup ran"}},
		{"cdc/after-produce-before-ack=crash", []string{"hit 1", "hit 2", "hit 3", "survived", "deferred cleanup ran"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			cmd, out, stderr := helper(t, tt.spec)
			got := lines(out)
			err := cmd.Wait()
			fired := len(tt.want) < 4
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("output %q, want %q", got, tt.want)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if fired {
				if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("exit %v, want death by SIGKILL", err)
				}
				if !strings.Contains(stderr.String(), "eventforge: failpoint cdc/after-confirm: crash") {
					t.Fatalf("stderr %q does not name the point", stderr)
				}
			} else if err != nil {
				t.Fatalf("exit %v, want success", err)
			}
		})
	}
}

// TestStallBlocksUntilKilled: the process stops at the point and stays.
func TestStallBlocksUntilKilled(t *testing.T) {
	cmd, out, _ := helper(t, "cdc/after-confirm=stall-after=2")
	got := make(chan []string, 1)
	go func() { got <- lines(out) }()
	select {
	case l := <-got:
		t.Fatalf("process went on past the stall: %q", l)
	case <-time.After(500 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	if l := <-got; strings.Join(l, "|") != "hit 1|hit 2" {
		t.Fatalf("output %q, want it to stop at the second hit", l)
	}
	_ = cmd.Wait()
}

func TestSetupRejectsBadSpec(t *testing.T) {
	if err := Setup("nope=crash"); !errors.Is(err, ErrSpec) {
		t.Fatalf("Setup = %v", err)
	}
	if active.Load() != nil {
		t.Fatal("a bad spec installed points")
	}
}

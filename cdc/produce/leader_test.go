package produce

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// silentLeader is a two-broker cluster: broker 1 leads partition 0 of
// topic and answers everything but produce requests (frozen for them),
// broker 2 is the client's seed and takes produce requests. lead(id) makes
// both name id the leader from then on.
func silentLeader(t *testing.T) (leader, other *sarama.MockBroker, lead func(id int32)) {
	t.Helper()
	leader, other = sarama.NewMockBroker(t, 1), sarama.NewMockBroker(t, 2)
	t.Cleanup(leader.Close)
	t.Cleanup(other.Close)
	lead = func(id int32) {
		md := sarama.NewMockMetadataResponse(t).SetBroker(leader.Addr(), 1).SetBroker(other.Addr(), 2).
			SetController(2).SetLeader(topic, 0, id)
		pid := sarama.NewMockInitProducerIDResponse(t).SetProducerID(7)
		leader.SetHandlerByMap(map[string]sarama.MockResponse{"MetadataRequest": md, "InitProducerIDRequest": pid})
		other.SetHandlerByMap(map[string]sarama.MockResponse{"MetadataRequest": md, "InitProducerIDRequest": pid,
			"ProduceRequest": sarama.NewMockSequence(ok(0))})
	}
	lead(1)
	return leader, other, lead
}

// TestEngineLeavesASilentLeader checks the retry of a generation whose
// leader left its request unanswered: the engine asks the other brokers
// for the partition's leader and sends to the silent broker again only
// after LeaderWait, so the generation lands on the new leader as soon as
// one is named, without a retry spent on the silent one.
func TestEngineLeavesASilentLeader(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cases := []struct {
		name        string
		newLeader   time.Duration // when broker 2 becomes the leader; 0: never
		leaderWait  time.Duration
		toSilent    int // produce requests the silent broker gets
		want        []string
		err         string
		most, least time.Duration // Run's duration
	}{
		{name: "another broker named: sent there", newLeader: 3 * timeout, leaderWait: time.Minute,
			toSilent: 1, want: []string{"delivered A"}, least: 3 * timeout, most: 3*timeout + 2*time.Second},
		{name: "none named: the silent one again after LeaderWait", leaderWait: 4 * timeout,
			toSilent: 2, err: "2 attempts", least: 5 * timeout, most: 6*timeout + 2*time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			silent, other, lead := silentLeader(t)
			if c.newLeader > 0 {
				time.AfterFunc(c.newLeader, func() { lead(2) })
			}
			r := run{cfg: Config{MaxAttempts: 2, LeaderWait: c.leaderWait}, readTimeout: timeout}
			began := time.Now()
			got, err := r.do(t, other, "A")
			took := time.Since(began)
			if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("Run = %v, want an error with %q", err, c.err)
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") {
				t.Errorf("settled %q, want %q", got, c.want)
			}
			if n := len(sent(silent)); n != c.toSilent {
				t.Errorf("the silent leader got %d produce requests, want %d", n, c.toSilent)
			}
			if took < c.least || took > c.most {
				t.Errorf("Run took %v, want %v to %v", took, c.least, c.most)
			}
		})
	}
}

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TestKafkaTimeoutFlags: the timeout flags and their environment twins
// reach the Kafka configuration, and an impossible pair names its flag.
func TestKafkaTimeoutFlags(t *testing.T) {
	def := kafka.Timeouts{Dial: kafka.DefaultDialTimeout, Request: kafka.DefaultRequestTimeout,
		Produce: kafka.DefaultProduceTimeout, Metadata: kafka.DefaultMetadataTimeout}
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		want    kafka.Timeouts
		wantErr string
	}{
		{name: "defaults", want: def},
		{name: "flags", args: []string{"--kafka-dial-timeout", "2s", "--kafka-request-timeout", "8s", "--kafka-produce-timeout", "6s", "--kafka-metadata-timeout", "30s"},
			want: kafka.Timeouts{Dial: 2 * time.Second, Request: 8 * time.Second, Produce: 6 * time.Second, Metadata: 30 * time.Second}},
		{name: "environment twin", env: []string{"EVENTFORGE_KAFKA_REQUEST_TIMEOUT=12s"},
			want: kafka.Timeouts{Dial: def.Dial, Request: 12 * time.Second, Produce: def.Produce, Metadata: def.Metadata}},
		{name: "produce not below request", args: []string{"--kafka-produce-timeout", "10s"}, wantErr: "--kafka-produce-timeout: 10s is not below the request timeout"},
		{name: "negative", args: []string{"--kafka-dial-timeout", "-1s"}, wantErr: "--kafka-dial-timeout: -1s: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, ok := parseKafkaFlags(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if kc.Timeouts != tc.want {
				t.Fatalf("timeouts %+v, want %+v", kc.Timeouts, tc.want)
			}
			if sc := kc.Base(); sc.Net.ReadTimeout != tc.want.Request || sc.Producer.Timeout != tc.want.Produce {
				t.Fatalf("sarama read %s produce %s, want %s and %s", sc.Net.ReadTimeout, sc.Producer.Timeout, tc.want.Request, tc.want.Produce)
			}
		})
	}
}

// parseKafkaFlags parses args (after --kafka-brokers) with env set, as a
// command sharing kafkaFlags does. With wantErr it checks the error and
// returns false; otherwise the configuration and true.
func parseKafkaFlags(t *testing.T, args, env []string, wantErr string) (kafka.Config, bool) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var f kafkaFlags
	cmd := &cobra.Command{Use: "probe"}
	f.register(cmd)
	if err := cmd.ParseFlags(append([]string{"--kafka-brokers", "127.0.0.1:9093"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	kc, err := f.config("probe")
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return kc, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return kc, true
}

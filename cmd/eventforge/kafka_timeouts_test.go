package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/kafka"
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
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			var f kafkaFlags
			cmd := &cobra.Command{Use: "probe"}
			f.register(cmd)
			if err := cmd.ParseFlags(append([]string{"--kafka-brokers", "127.0.0.1:9093"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := applyEnv(cmd); err != nil {
				t.Fatal(err)
			}
			kc, err := f.config("probe")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
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

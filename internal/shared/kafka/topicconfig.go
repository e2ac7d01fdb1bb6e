package kafka

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
)

// TopicMaxMessageBytes is the name of a topic's record size limit.
const TopicMaxMessageBytes = "max.message.bytes"

// DescribeConfig reads the named configuration entries of one resource (a
// topic's own values or the broker's defaults) with DescribeConfigs; an
// error the broker reports for the resource is returned as
// *sarama.DescribeConfigError, as sarama's deprecated single-resource call
// did.
func DescribeConfig(admin sarama.ClusterAdmin, res sarama.ConfigResource) ([]sarama.ConfigEntry, error) {
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{&res}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	var entries []sarama.ConfigEntry
	for _, r := range results {
		if r.Name != res.Name {
			continue
		}
		if !errors.Is(r.ErrorCode, sarama.ErrNoError) {
			return nil, &sarama.DescribeConfigError{Err: r.ErrorCode, ErrMsg: r.ErrorMsg}
		}
		entries = append(entries, r.Configs...)
	}
	return entries, nil
}

// MaxMessageBytes reads a topic's max.message.bytes (its own or the broker's
// default).
func MaxMessageBytes(admin sarama.ClusterAdmin, topic string) (int, error) {
	entries, err := DescribeConfig(admin, sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{TopicMaxMessageBytes},
	})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	for _, e := range entries {
		if e.Name == TopicMaxMessageBytes {
			v, err := strconv.Atoi(e.Value)
			if err != nil {
				return 0, fmt.Errorf("topic %s: %s %q: %w", topic, TopicMaxMessageBytes, e.Value, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("describe topic %s: no %s", topic, TopicMaxMessageBytes)
}

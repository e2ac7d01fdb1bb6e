package kafka

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
)

// TopicMaxMessageBytes is the name of a topic's record size limit.
const TopicMaxMessageBytes = "max.message.bytes"

// MaxMessageBytes reads a topic's max.message.bytes (its own or the broker's
// default) with DescribeConfigs.
func MaxMessageBytes(admin sarama.ClusterAdmin, topic string) (int, error) {
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{TopicMaxMessageBytes},
	}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	for _, r := range results {
		if !errors.Is(r.ErrorCode, sarama.ErrNoError) {
			return 0, fmt.Errorf("describe topic %s: %w: %s", topic, r.ErrorCode, r.ErrorMsg)
		}
		for _, e := range r.Configs {
			if e.Name == TopicMaxMessageBytes {
				v, err := strconv.Atoi(e.Value)
				if err != nil {
					return 0, fmt.Errorf("topic %s: %s %q: %w", topic, TopicMaxMessageBytes, e.Value, err)
				}
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("describe topic %s: no %s", topic, TopicMaxMessageBytes)
}

package console

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// scanLimit bounds how far back a partition is read when looking for an
// event: the console reads real topics, which may be long.
const scanLimit = 20000

// lookupTimeout bounds the Kafka reads of one lookup, every partition
// included.
const lookupTimeout = 5 * time.Second

// kafkaReader reads what the console shows from the brokers.
type kafkaReader struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func newKafkaReader(kc kafka.Config) (*kafkaReader, error) {
	kc.ClientID = "eventforge-console"
	brokers := kc.Brokers
	sc := kc.Base()
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Consumer.Return.Errors = false
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, kafka.Explain(fmt.Errorf("connect to Kafka: %w", err))
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("connect Kafka admin: %w", err)
	}
	return &kafkaReader{client: client, admin: admin}, nil
}

func (k *kafkaReader) close() { _ = k.admin.Close() } // closes the client too

// record is one Kafka record of an event.
type record struct {
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp time.Time         `json:"timestamp"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func (k *kafkaReader) partitions(topic string) (int32, error) {
	if err := k.client.RefreshMetadata(topic); err != nil {
		return 0, err
	}
	ps, err := k.client.Partitions(topic)
	if err != nil {
		return 0, err
	}
	return int32(len(ps)), nil
}

// find returns the records of partition p whose event_id header is eventID.
func (k *kafkaReader) find(deadline time.Time, topic string, p int32, eventID string) ([]record, error) {
	return k.scan(deadline, topic, p, func(_ []byte, hs map[string]string) bool { return hs["event_id"] == eventID })
}

// findKey returns the records of partition p with the key.
func (k *kafkaReader) findKey(deadline time.Time, topic string, p int32, key string) ([]record, error) {
	return k.scan(deadline, topic, p, func(k []byte, _ map[string]string) bool { return string(k) == key })
}

// scan reads partition p up to its high watermark and keeps what match
// accepts, until the deadline.
func (k *kafkaReader) scan(deadline time.Time, topic string, p int32, match func(key []byte, headers map[string]string) bool) ([]record, error) {
	var out []record
	err := k.read(deadline, topic, p, func(oldest, hwm int64) int64 { return max(oldest, hwm-scanLimit) }, func(m *sarama.ConsumerMessage) {
		hs := map[string]string{}
		for _, h := range m.Headers {
			hs[string(h.Key)] = string(h.Value)
		}
		if match(m.Key, hs) {
			out = append(out, record{Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp, Headers: hs})
		}
	})
	return out, err
}

// read hands each record of partition p from the offset start picks
// (given the oldest offset and the high watermark) up to the high
// watermark to each, until the deadline.
func (k *kafkaReader) read(deadline time.Time, topic string, p int32, start func(oldest, hwm int64) int64, each func(*sarama.ConsumerMessage)) error {
	hwm, err := k.client.GetOffset(topic, p, sarama.OffsetNewest)
	if err != nil {
		return fmt.Errorf("read high watermark: %w", err)
	}
	oldest, err := k.client.GetOffset(topic, p, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("read oldest offset: %w", err)
	}
	from := start(oldest, hwm)
	if from >= hwm {
		return nil
	}
	consumer, err := sarama.NewConsumerFromClient(k.client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, p, from)
	if err != nil {
		return fmt.Errorf("consume %s/%d: %w", topic, p, err)
	}
	defer pc.Close()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case m := <-pc.Messages():
			each(m)
			if m.Offset >= hwm-1 {
				return nil
			}
		case <-timer.C:
			return errors.New("reading the topic timed out")
		}
	}
}

// findAll looks for the event's records in every partition (dead letters
// keep the original key, but their topic may have another partition count).
func (k *kafkaReader) findAll(deadline time.Time, topic, eventID string) ([]record, error) {
	n, err := k.partitions(topic)
	if err != nil {
		return nil, err
	}
	var out []record
	for p := range n {
		rs, err := k.find(deadline, topic, p, eventID)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// committed is the group's committed offset of a partition (-1: none).
func (k *kafkaReader) committed(group, topic string, p int32) (int64, error) {
	resp, err := k.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {p}})
	if err != nil {
		return -1, fmt.Errorf("read committed offsets: %w", err)
	}
	if b := resp.GetBlock(topic, p); b != nil {
		return b.Offset, nil
	}
	return -1, nil
}

// lag is the group's lag on the topic: the sum over partitions of the high
// watermark minus the committed offset (the oldest offset when none).
func (k *kafkaReader) lag(group, topic string) (int64, error) {
	n, err := k.partitions(topic)
	if err != nil {
		return 0, err
	}
	pvs, err := k.offsets(group, topic, n)
	if err != nil {
		return 0, err
	}
	var lag int64
	for _, p := range pvs {
		lag += p.Lag
	}
	return lag, nil
}

// assignments are the group members' partitions of topic, by member id.
func (k *kafkaReader) assignments(group, topic string) (map[string][]int32, error) {
	ms, err := k.members(group, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int32, len(ms))
	for _, m := range ms {
		out[m.ID] = m.Partitions
	}
	return out, nil
}

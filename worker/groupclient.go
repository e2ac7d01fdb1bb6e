package worker

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// groupClient is the sarama.Client of the consumer group: two clients,
// each with its own connections, that differ in how long a request may wait
// for its response. sarama has one read timeout per client, and the two
// kinds of request of a consumer group need different ones:
//
//   - fetches and metadata (the embedded client) get the request timeout
//     (--kafka-request-timeout, 3 s): a fetch to a frozen leader times out
//     soon and the partition looks for its new leader;
//   - group coordination (coord: join, sync, heartbeat, offset commit and
//     fetch, leave, all sent to the coordinator that Coordinator returns)
//     gets groupRequestTimeout, because the coordinator holds a join's
//     response until the group has formed.
//
// A join held by the coordinator therefore never delays a fetch, and a
// fetch never waits behind a held join on a shared connection.
//
// The partitions' leaders come from a kafka.LeaderLookup, not from the
// fetch client's own metadata refresh: after a fetch failed, sarama
// refreshes the topic's metadata on the broker with the fewest requests in
// flight, which may be the frozen leader (a new connection to it costs
// three request timeouts), and then subscribes the partition to the leader
// the metadata names, which is the frozen broker until Kafka fences it.
// Here a refresh asks the brokers on connections of the lookup's own, and a
// leader that does not answer within a second is not handed out: the
// partition tries again after the consumer's retry backoff, and moves to
// the new leader as soon as a broker names it.
type groupClient struct {
	sarama.Client
	coord   sarama.Client
	leaders *kafka.LeaderLookup
}

// newGroupClient connects both clients: fetch is the configuration of the
// fetches and metadata, coord that of the group coordination.
func newGroupClient(brokers []string, fetch, coord *sarama.Config) (*groupClient, error) {
	fc, err := sarama.NewClient(brokers, fetch)
	if err != nil {
		return nil, err
	}
	cc, err := sarama.NewClient(brokers, coord)
	if err != nil {
		_ = fc.Close()
		return nil, err
	}
	return &groupClient{Client: fc, coord: cc, leaders: kafka.NewLeaderLookup(fc)}, nil
}

// RefreshMetadata looks the topics' leaders up (LeaderAndEpoch hands them
// out), and refreshes the fetch client's own metadata only for a topic
// whose partitions the lookup could not read or that has a partition count
// other than the client's (a topic created, partitions added), or when
// asked for every topic.
func (c *groupClient) RefreshMetadata(topics ...string) error {
	if len(topics) == 0 {
		return c.Client.RefreshMetadata()
	}
	var stale []string
	for _, t := range topics {
		n, err := c.leaders.Refresh(t)
		if err != nil {
			stale = append(stale, t)
			continue
		}
		if ps, err := c.Client.Partitions(t); err != nil || len(ps) != n {
			stale = append(stale, t)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return c.Client.RefreshMetadata(stale...)
}

// Leader is LeaderAndEpoch without the epoch.
func (c *groupClient) Leader(topic string, partition int32) (*sarama.Broker, error) {
	b, _, err := c.LeaderAndEpoch(topic, partition)
	return b, err
}

// LeaderAndEpoch is the partition's leader as the latest lookup named it
// (the fetch client's cached one before any), unless it does not answer:
// then sarama.ErrLeaderNotAvailable, and the partition consumer tries
// again after its backoff.
func (c *groupClient) LeaderAndEpoch(topic string, partition int32) (*sarama.Broker, int32, error) {
	b, epoch, err := c.namedLeader(topic, partition)
	if err != nil {
		return nil, -1, err
	}
	if !c.leaders.Answers(b) {
		return nil, -1, fmt.Errorf("broker %d, the leader of %s/%d, does not answer: %w", b.ID(), topic, partition, sarama.ErrLeaderNotAvailable)
	}
	return b, epoch, nil
}

// GetOffset is the partition's offset at timestamp (sarama.OffsetNewest,
// sarama.OffsetOldest), asked of the leader LeaderAndEpoch hands out, then,
// after a lookup, once more: the fetch client's own would ask the leader
// of its cached metadata, which may be a frozen broker.
func (c *groupClient) GetOffset(topic string, partition int32, timestamp int64) (int64, error) {
	offset, err := c.offset(topic, partition, timestamp)
	if err != nil {
		if rerr := c.RefreshMetadata(topic); rerr != nil {
			return -1, errors.Join(err, rerr)
		}
		offset, err = c.offset(topic, partition, timestamp)
	}
	return offset, err
}

func (c *groupClient) offset(topic string, partition int32, timestamp int64) (int64, error) {
	b, err := c.Leader(topic, partition)
	if err != nil {
		return -1, err
	}
	req := sarama.NewOffsetRequest(c.Config().Version)
	req.AddBlock(topic, partition, timestamp, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		_ = b.Close()
		return -1, err
	}
	block := resp.GetBlock(topic, partition)
	switch {
	case block == nil:
		return -1, sarama.ErrIncompleteResponse
	case !errors.Is(block.Err, sarama.ErrNoError):
		return -1, block.Err
	case len(block.Offsets) != 1:
		return -1, sarama.ErrOffsetOutOfRange
	}
	return block.Offsets[0], nil
}

// namedLeader is the partition's leader as the latest lookup named it,
// else as the fetch client has it.
func (c *groupClient) namedLeader(topic string, partition int32) (*sarama.Broker, int32, error) {
	if id, epoch, ok := c.leaders.Latest(topic, partition); ok {
		b, err := c.Client.Broker(id)
		if errors.Is(err, sarama.ErrBrokerNotFound) {
			_ = c.Client.RefreshMetadata(topic) // a broker the client does not know yet
			b, err = c.Client.Broker(id)
		}
		if err == nil {
			return b, epoch, nil
		}
	}
	return c.Client.LeaderAndEpoch(topic, partition)
}

// Coordinator is the group's coordinator, on the coordination client.
func (c *groupClient) Coordinator(group string) (*sarama.Broker, error) {
	return c.coord.Coordinator(group)
}

// RefreshCoordinator looks the group's coordinator up again, on the
// coordination client.
func (c *groupClient) RefreshCoordinator(group string) error {
	return c.coord.RefreshCoordinator(group)
}

// Close closes both clients.
func (c *groupClient) Close() error {
	return errors.Join(c.Client.Close(), c.coord.Close())
}

// newConsumerGroup is the Runner's consumer group on a groupClient, and
// the function that closes the client once the group is closed.
func (c Config) newConsumerGroup() (sarama.ConsumerGroup, func() error, error) {
	client, err := newGroupClient(c.Kafka.Brokers, c.consumerConfig(), c.coordinatorConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	group, err := sarama.NewConsumerGroupFromClient(c.Group, client)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return group, client.Close, nil
}

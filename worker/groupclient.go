package worker

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
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
type groupClient struct {
	sarama.Client
	coord sarama.Client
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
	return &groupClient{Client: fc, coord: cc}, nil
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

// Package kafka holds EventForge's shared Kafka plumbing: client configuration
// for the idempotent producer, the Java client's keyed partitioner, and topic
// creation.
//
// Imports (floor: shared library): internal/shared/backoff and internal/shared/fielderr
// only.
package kafka

import (
	"errors"

	"github.com/IBM/sarama"
)

// Murmur2 is Kafka's Utils.murmur2 (the Java client's hash of record keys),
// returned as the same 32-bit two's-complement value Java computes.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[length&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// PartitionForKey is the Java client's default partition of a keyed record:
// murmur2 of the key bytes, made positive, modulo the partition count.
func PartitionForKey(key []byte, numPartitions int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % numPartitions
}

// ErrNoKey is returned for a record without a key: EventForge always keys
// records by aggregate id, so a missing key is a bug, not a case to spread.
var ErrNoKey = errors.New("record has no key")

// JavaPartitioner is a sarama.Partitioner that places keyed records where the
// Java client would, so EventForge's keys co-partition with other producers.
type JavaPartitioner struct{}

// NewJavaPartitioner is a sarama.PartitionerConstructor for JavaPartitioner.
func NewJavaPartitioner(string) sarama.Partitioner { return JavaPartitioner{} }

// Partition implements sarama.Partitioner.
func (JavaPartitioner) Partition(msg *sarama.ProducerMessage, numPartitions int32) (int32, error) {
	if msg.Key == nil {
		return 0, ErrNoKey
	}
	key, err := msg.Key.Encode()
	if err != nil {
		return 0, err
	}
	return PartitionForKey(key, numPartitions), nil
}

// RequiresConsistency implements sarama.Partitioner: a key always maps to the
// same partition, even while some partitions are unavailable.
func (JavaPartitioner) RequiresConsistency() bool { return true }

package worker

import "github.com/IBM/sarama"

// Test seams for the package's external tests.

// SetAfterCommit makes a Runner call f after each inbox transaction commits
// and before its offsets are marked; an error stops the Runner there.
func SetAfterCommit(c *Config, f func(evs []Event) error) { c.hooks.afterCommit = f }

// SetBeforeDeadLetter makes a Runner call f before producing a dead letter.
func SetBeforeDeadLetter(c *Config, f func(m *sarama.ConsumerMessage)) { c.hooks.beforeDeadLetter = f }

// SetJitter makes a Runner's backoff use f instead of random jitter: 0 is
// the shortest wait, just under 1 the longest.
func SetJitter(c *Config, f func() float64) { c.hooks.jitter = f }

// ApplyBatch is applyBatch.
var ApplyBatch = applyBatch

package tracing

import "go.opentelemetry.io/otel/attribute"

// Operations of the messaging semantic conventions.
const (
	OpSend    = "send"
	OpProcess = "process"
)

// Messaging returns the messaging semantic-convention attributes of a Kafka
// operation (OpSend or OpProcess) on topic for the message (event) id,
// followed by more.
func Messaging(op, topic, messageID string, more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.name", op),
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.destination.name", topic),
		attribute.String("messaging.message.id", messageID),
	}, more...)
}

package schemareg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoCodec writes a JSON payload as the first message of a .proto
// schema (protojson's mapping: field names as written in the .proto or
// in lowerCamelCase, enums by name, 64-bit integers as numbers or
// strings), after Confluent's message indexes ([0]: one zero byte).
type protoCodec struct {
	msg protoreflect.MessageDescriptor
}

// protoFile is the name the schema text is compiled under.
const protoFile = "schema.proto"

func newProtoCodec(text string) (*protoCodec, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{protoFile: text}),
	})}
	files, err := c.Compile(context.Background(), protoFile)
	if err != nil {
		return nil, fmt.Errorf("compile protobuf schema: %w", err)
	}
	msgs := files[0].Messages()
	if msgs.Len() == 0 {
		return nil, errors.New("protobuf schema has no message")
	}
	return &protoCodec{msg: msgs.Get(0)}, nil
}

func (c *protoCodec) encode(dst, payload []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(c.msg)
	if err := protojson.Unmarshal(payload, m); err != nil {
		return dst, &mismatch{reason: fmt.Sprintf("message %s: %v", c.msg.FullName(), err)}
	}
	dst = append(dst, 0) // message indexes [0]: the first message
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}

func (c *protoCodec) decode(dst, body []byte) ([]byte, error) {
	md, rest, err := c.messageAt(body)
	if err != nil {
		return dst, err
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(rest, m); err != nil {
		return dst, fmt.Errorf("message %s: %w", md.FullName(), err)
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// messageAt reads Confluent's message indexes (zig-zag varints: a count,
// then the index at each nesting level; a lone 0 means [0]) and returns
// the message they name and the rest of the body.
func (c *protoCodec) messageAt(body []byte) (protoreflect.MessageDescriptor, []byte, error) {
	n, k := binary.Varint(body)
	if k <= 0 || n < 0 || n > 100 {
		return nil, nil, errors.New("bad protobuf message indexes")
	}
	body = body[k:]
	if n == 0 {
		return c.msg, body, nil
	}
	msgs := c.msg.ParentFile().Messages()
	var md protoreflect.MessageDescriptor
	for ; n > 0; n-- {
		i, k := binary.Varint(body)
		if k <= 0 || i < 0 || int(i) >= msgs.Len() {
			return nil, nil, errors.New("protobuf message index out of range")
		}
		body = body[k:]
		md = msgs.Get(int(i))
		msgs = md.Messages()
	}
	return md, body, nil
}

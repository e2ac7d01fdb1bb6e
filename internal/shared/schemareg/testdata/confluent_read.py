"""Reads Confluent-framed values with Confluent's own deserializers.

argv[1]: the schema registry URL. stdin: one JSON object a line,
{"format": "avro"|"protobuf"|"json-schema", "topic": ..., "value": base64,
 "descriptor": base64 FileDescriptorProto (protobuf: the message class)}.
stdout: one line each, {"id": schema id, "value": the deserialized value}
(protobuf as json_format.MessageToDict with the .proto's field names), or
{"error": ...}.
"""
import base64
import json
import struct
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from google.protobuf.message_factory import GetMessageClass

client = SchemaRegistryClient({"url": sys.argv[1]})
avro = AvroDeserializer(client)
jsonschema = JSONDeserializer(None, schema_registry_client=client)
protos = {}


def proto_deserializer(descriptor):
    if descriptor not in protos:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(descriptor))
        pool = descriptor_pool.DescriptorPool()
        fd = pool.Add(fdp)
        cls = GetMessageClass(pool.FindMessageTypeByName(fdp.package + "." + fdp.message_type[0].name if fdp.package else fdp.message_type[0].name))
        # Without the registry: the writer's message indexes are read, the
        # body parsed with the class.
        protos[descriptor] = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    return protos[descriptor]


for line in sys.stdin:
    req = json.loads(line)
    data = base64.b64decode(req["value"])
    ctx = SerializationContext(req["topic"], MessageField.VALUE)
    try:
        if req["format"] == "avro":
            v = avro(data, ctx)
        elif req["format"] == "json-schema":
            v = jsonschema(data, ctx)
        else:
            msg = proto_deserializer(req["descriptor"])(data, ctx)
            v = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        out = {"id": struct.unpack(">I", data[1:5])[0], "value": v}
    except Exception as e:  # the test reports it
        out = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(out), flush=True)

// Golden runs Debezium's outbox event router (io.debezium.transforms.outbox.EventRouter)
// and Kafka Connect's converters on the cases of cases.jsonl and writes what
// they produce to golden.jsonl, the expected output of the Go converters'
// tests. It is not part of the build: generate.sh runs it.
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

import com.fasterxml.jackson.databind.*;
import com.fasterxml.jackson.databind.node.*;
import org.apache.kafka.connect.data.*;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.StringConverter;
import io.debezium.data.Envelope;
import io.debezium.transforms.outbox.EventRouter;

public class Golden {
    static final ObjectMapper M = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            ObjectNode c = (ObjectNode) M.readTree(line);
            ObjectNode res = c.deepCopy();
            ObjectNode forms = res.putObject("out");
            if (c.get("name").asText().startsWith("key/")) {
                keyForms(c, forms);
            } else {
                for (String form : new String[] {"string", "json", "json-schemas", "json-expanded", "json-expanded-schemas"}) {
                    forms.put(form, run(c, form));
                }
            }
            out.add(M.writeValueAsString(res));
        }
        Files.write(Paths.get(args[1]), out, StandardCharsets.UTF_8);
    }

    static Schema payloadSchema(String kind, boolean notNull) {
        SchemaBuilder b;
        switch (kind) {
            case "text": b = SchemaBuilder.string(); break;
            case "bytea": b = SchemaBuilder.bytes(); break;
            default: b = io.debezium.data.Json.builder();
        }
        return notNull ? b.build() : b.optional().build();
    }

    static Object payloadValue(ObjectNode c) {
        JsonNode p = c.get("payload");
        if (p == null || p.isNull()) return null;
        if (c.get("kind").asText().equals("bytea")) return Base64.getDecoder().decode(p.asText());
        return p.asText();
    }

    /** The record the PostgreSQL connector emits for an insert into the outbox. */
    static SourceRecord insert(Schema payload, Object value, Schema keySchema, Object key) {
        Schema row = SchemaBuilder.struct().name("dbserver1.public.outbox.Value")
                .field("id", io.debezium.data.Uuid.builder().build())
                .field("aggregatetype", Schema.STRING_SCHEMA)
                .field("aggregateid", keySchema)
                .field("type", Schema.STRING_SCHEMA)
                .field("payload", payload)
                .optional().build();
        Schema source = SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source")
                .field("connector", Schema.STRING_SCHEMA).build();
        Envelope env = Envelope.defineSchema().withName("dbserver1.public.outbox.Envelope")
                .withRecord(row).withSource(source).build();
        Struct after = new Struct(row).put("id", "0b6a3e3c-9d7e-4a43-8d4f-6f1f0f0c1a2b")
                .put("aggregatetype", "Order").put("aggregateid", key).put("type", "OrderCreated").put("payload", value);
        Struct v = env.create(after, new Struct(source).put("connector", "postgresql"), java.time.Instant.ofEpochMilli(1));
        return new SourceRecord(Map.of(), Map.of(), "dbserver1.public.outbox", null, null, null, env.schema(), v, 1L);
    }

    static SourceRecord route(SourceRecord r, boolean expand) {
        EventRouter<SourceRecord> router = new EventRouter<>();
        router.configure(Map.of("table.expand.json.payload", Boolean.toString(expand)));
        return router.apply(r);
    }

    static String run(ObjectNode c, String form) {
        try {
            boolean notNull = c.has("notnull") && c.get("notnull").asBoolean();
            SourceRecord r = route(insert(payloadSchema(c.get("kind").asText(), notNull), payloadValue(c), Schema.STRING_SCHEMA, "k"),
                    form.startsWith("json-expanded"));
            byte[] b;
            if (form.equals("string")) {
                b = r.value() instanceof byte[] ? (byte[]) r.value()
                        : new StringConverter().fromConnectData(r.topic(), r.valueSchema(), r.value());
            } else {
                JsonConverter jc = new JsonConverter();
                jc.configure(Map.of("schemas.enable", Boolean.toString(form.endsWith("-schemas") || form.equals("json-schemas")), "converter.type", "value"));
                b = jc.fromConnectData(r.topic(), r.valueSchema(), r.value());
            }
            return b == null ? "tombstone" : "b64:" + Base64.getEncoder().encodeToString(b);
        } catch (Exception e) {
            return "error: " + e.getClass().getSimpleName();
        }
    }

    static void keyForms(ObjectNode c, ObjectNode forms) {
        boolean notNull = c.has("notnull") && c.get("notnull").asBoolean();
        String text = c.get("key").asText();
        SchemaBuilder b;
        Object key;
        switch (c.get("type").asText()) {
            case "uuid": b = io.debezium.data.Uuid.builder(); key = text; break;
            case "int2": b = SchemaBuilder.int16(); key = Short.valueOf(text); break;
            case "int4": b = SchemaBuilder.int32(); key = Integer.valueOf(text); break;
            case "int8": b = SchemaBuilder.int64(); key = Long.valueOf(text); break;
            default: b = SchemaBuilder.string(); key = text;
        }
        Schema ks = notNull ? b.build() : b.optional().build();
        SourceRecord r = route(insert(payloadSchema("jsonb", false), "{}", ks, key), false);
        forms.put("string", "b64:" + Base64.getEncoder().encodeToString(new StringConverter().fromConnectData(r.topic(), r.keySchema(), r.key())));
        for (boolean schemas : new boolean[] {false, true}) {
            JsonConverter jc = new JsonConverter();
            jc.configure(Map.of("schemas.enable", Boolean.toString(schemas), "converter.type", "key"));
            forms.put(schemas ? "json-schemas" : "json", "b64:" + Base64.getEncoder().encodeToString(jc.fromConnectData(r.topic(), r.keySchema(), r.key())));
        }
    }
}

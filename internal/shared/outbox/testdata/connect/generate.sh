#!/bin/sh
# Regenerates cases.jsonl (payloads as PostgreSQL prints them) and
# golden.jsonl (what Debezium 3.6.1's outbox event router and Kafka
# Connect 4.1.1's converters write for them). Needs psql with
# EVENTFORGE_PG_URL, a JDK, and these jars in the local Maven repository
# (mvn dependency:get -Dtransitive=false -Dartifact=…):
# io.debezium:debezium-{connect-plugins,connector-common,util,api,config}:3.6.1.Final,
# org.apache.kafka:connect-{api,json,transforms}:4.1.1,
# com.fasterxml.jackson.module:jackson-module-blackbird:2.19.0, plus kafka-clients,
# jackson and slf4j (here from the local broker's libraries).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
m2=${M2:-$HOME/.m2/repository}
libs=${KAFKA_LIBS:-/work/main/.eventforge/kafka-libs}
cp=$(ls "$m2"/io/debezium/debezium-*/3.6.1.Final/*.jar "$m2"/org/apache/kafka/connect-*/4.1.1/*.jar \
  "$m2"/com/fasterxml/jackson/module/jackson-module-blackbird/2.19.0/*.jar "$libs"/kafka-clients-*.jar "$libs"/jackson-*.jar "$libs"/slf4j-api-*.jar | tr '\n' ':')
python3 "$here/gencases.py"
tmp=$(mktemp -d)
javac -d "$tmp" -cp "$cp" "$here/Golden.java"
java -cp "$cp$tmp" Golden "$here/cases.jsonl" "$here/golden.jsonl"
rm -rf "$tmp"

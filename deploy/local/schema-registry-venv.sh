#!/usr/bin/env bash
# Prints the python of a venv holding Confluent's Python client
# (confluent-kafka with its avro, protobuf, json and schemaregistry
# extras, pinned), the independent reader of the schema registry tests:
# made on the first call under the state directory, reused after (PyPI;
# pip caches in ~/.cache). EVENTFORGE_SR_VENV overrides the venv's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
state=${EVENTFORGE_STATE_DIR:-$root/.eventforge}
venv=${EVENTFORGE_SR_VENV:-$state/venv-schema-registry}
version=2.12.2
# Test packages run in parallel: one installs, the others wait for it.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c "import confluent_kafka, fastavro, google.protobuf, jsonschema, sys; sys.exit(confluent_kafka.__version__ != '$version')" 2>/dev/null; then
	echo "installing confluent-kafka $version into $venv" >&2
	python3 -m venv --clear "$venv" >&2 || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
	"$venv/bin/pip" install -q --disable-pip-version-check "confluent-kafka[avro,protobuf,json,schemaregistry]==$version" >&2
fi
echo "$venv/bin/python"

#!/usr/bin/env python3
"""Writes cases.jsonl: each shape of shapes.txt as PostgreSQL prints it for
a jsonb and a json column, plus text, bytea and NULL payloads. Run with
EVENTFORGE_PG_URL set (see generate.sh)."""
import base64, json, os, subprocess, sys

def pg(sql, *args):
    out = subprocess.run(["psql", os.environ["EVENTFORGE_PG_URL"], "-XAt", "-v", "ON_ERROR_STOP=1"] +
                         [a for i, v in enumerate(args) for a in ("-v", f"v{i}={v}")],
                         input=sql, capture_output=True, text=True, check=True)
    return out.stdout[:-1]

cases = []
here = os.path.dirname(os.path.abspath(__file__))
for i, shape in enumerate(open(os.path.join(here, "shapes.txt"), encoding="utf-8").read().splitlines()):
    for kind in ("jsonb", "json"):
        text = pg(f"SELECT (:'v0')::{kind}::text", shape)
        cases.append({"name": f"{kind}/{i}", "kind": kind, "payload": text})
# Jackson's limits on reading: 1000 digits of a number, 1000 levels of nesting.
for name, shape in [("digits1000", '{"n": ' + "7" * 1000 + '}'), ("digits1001", '{"n": ' + "7" * 1001 + '}'),
                    ("depth1000", '{"a": ' * 999 + '{"b": 1' + '}' * 1000), ("depth1001", '{"a": ' * 1000 + '{"b": 1' + '}' * 1001),
                    # and on writing, 1000 levels: the expanded schema of 499 nested
                    # objects reaches 1000 levels, with an array leaf 1001.
                    ("schema1000", '{"a": ' * 498 + '{"b": 1' + '}' * 499),
                    ("schema1001", '{"a": ' * 498 + '{"b": [1]' + '}' * 499)]:
    cases.append({"name": f"jsonb/{name}", "kind": "jsonb", "payload": pg("SELECT (:'v0')::jsonb::text", shape)})
for i, text in enumerate(['plain text with "quotes", é and a tab\t', '{"t": 1}', '', '[1, 2]', '{"x": 1} trailing']):
    cases.append({"name": f"text/{i}", "kind": "text", "payload": text})
for i, raw in enumerate([b"\x00\xff\x10", b"", b'{"a": 1}']):
    cases.append({"name": f"bytea/{i}", "kind": "bytea", "payload": base64.b64encode(raw).decode()})
cases.append({"name": "null/jsonb", "kind": "jsonb", "payload": None})
cases.append({"name": "notnull/jsonb", "kind": "jsonb", "payload": '{"a": 1}', "notnull": True})
keys = [{"type": "varchar", "key": 'order-1 "é" 😀'}, {"type": "varchar", "key": "k", "notnull": True},
        {"type": "uuid", "key": "0b6a3e3c-9d7e-4a43-8d4f-6f1f0f0c1a2b", "notnull": True},
        {"type": "int4", "key": "-42", "notnull": True}, {"type": "int8", "key": "9007199254740993"},
        {"type": "int2", "key": "7", "notnull": True}, {"type": "bpchar", "key": "ab  "}]
with open(os.path.join(here, "cases.jsonl"), "w", encoding="utf-8") as f:
    for c in cases:
        f.write(json.dumps(c, ensure_ascii=False) + "\n")
    for k in keys:
        f.write(json.dumps(dict(k, name="key/" + k["type"]), ensure_ascii=False) + "\n")

#!/bin/sh
# First start of the compose PostgreSQL only (docker-entrypoint-initdb.d):
# the schema owner is a plain login role, not the superuser. It owns the
# eventforge database (and so, on PostgreSQL 15, its public schema) and runs
# `eventforge migrate`; the superuser only runs this and sql/roles.sql.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
	-v owner_password="$EVENTFORGE_OWNER_PASSWORD" <<'SQL'
CREATE ROLE eventforge LOGIN PASSWORD :'owner_password';
CREATE DATABASE eventforge OWNER eventforge;
SQL

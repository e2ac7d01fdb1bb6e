-- EventForge least-privilege roles. NOT a migration: an administrator runs it
-- with psql, connected to the EventForge database as a superuser (only a
-- superuser may give a role REPLICATION on PostgreSQL 15), after
-- `eventforge migrate` (run as the owner of the schema) created the tables:
--
--   psql -v ON_ERROR_STOP=1 -d eventforge -f sql/roles.sql
--   psql -v ON_ERROR_STOP=1 -d eventforge -v relay_role=relay_eu -v relay_password="$PW" -f sql/roles.sql
--
-- Variables (-v name=value), all optional:
--   relay_role   eventforge_relay   login role of `eventforge cdc run`
--   worker_role  eventforge_worker  login role of `eventforge worker run`
--   api_role     eventforge_api     login role of `eventforge api run`
--   relay_group, worker_group, api_group (eventforge_*_group): NOLOGIN group
--                roles holding the privileges; more login roles can join them
--                (GRANT eventforge_worker_group TO billing_worker)
--   relay_password, worker_password, api_password: set when given. The
--                statement carries the password in clear to the server (its
--                log shows it under log_statement = 'ddl' or 'all'); leave it
--                out and use psql's \password (hashes locally), certificates
--                or your platform's IAM instead where that matters.
--   schema       public             schema of the EventForge tables
--   replication_role  (unset)      give the relay the right to replicate through
--                membership of this role instead of the REPLICATION attribute:
--                rds_replication on Amazon RDS and Aurora, where no superuser
--                may set REPLICATION (docs/managed-postgres.md)
--   worker_demo_handlers  on        grant what deploy/handlers/orders.yaml needs
--   revoke_public_create  on        revoke CREATE on the schema from PUBLIC
--                (a no-op on PostgreSQL 15+, which no longer grants it)
--
-- Idempotent: run it again after a change; it creates what is missing and
-- grants again what is granted. It never drops or revokes a role's other
-- privileges, and it does not strip attributes (SUPERUSER, CREATEDB, …) that
-- an existing login role of the same name already has: its summary at the end
-- shows them. Why each privilege is needed: SECURITY.md#roles.
--
-- Not covered here, run as the owner of the schema (the role that ran
-- migrate): `eventforge migrate`, `outbox prune` (DELETE on outbox) and
-- `slot drop` (which also needs REPLICATION or superuser).

\set ON_ERROR_STOP on

\if :{?relay_role}
\else
\set relay_role eventforge_relay
\endif
\if :{?worker_role}
\else
\set worker_role eventforge_worker
\endif
\if :{?api_role}
\else
\set api_role eventforge_api
\endif
\if :{?relay_group}
\else
\set relay_group eventforge_relay_group
\endif
\if :{?worker_group}
\else
\set worker_group eventforge_worker_group
\endif
\if :{?api_group}
\else
\set api_group eventforge_api_group
\endif
\if :{?schema}
\else
\set schema public
\endif
\if :{?worker_demo_handlers}
\else
\set worker_demo_handlers on
\endif
\if :{?revoke_public_create}
\else
\set revoke_public_create on
\endif

BEGIN;

-- Group roles: they hold the table privileges and never log in.
SELECT format('CREATE ROLE %I NOLOGIN', g)
FROM unnest(ARRAY[:'relay_group', :'worker_group', :'api_group']) AS g
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = g) \gexec

-- Login roles: members of their group. INHERIT makes the group's privileges
-- theirs; role attributes such as REPLICATION are never inherited, so the
-- relay's login role carries REPLICATION itself, or, where the provider
-- grants it through a role (replication_role), is a member of that role.
SELECT format('CREATE ROLE %I LOGIN', r)
FROM unnest(ARRAY[:'relay_role', :'worker_role', :'api_role']) AS r
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec

ALTER ROLE :"relay_role" LOGIN INHERIT;
\if :{?replication_role}
SELECT format('GRANT %I TO %I', :'replication_role', :'relay_role')
WHERE NOT pg_has_role(:'relay_role', :'replication_role', 'MEMBER') \gexec
\else
ALTER ROLE :"relay_role" REPLICATION;
\endif
ALTER ROLE :"worker_role" LOGIN INHERIT;
ALTER ROLE :"api_role" LOGIN INHERIT;

SELECT format('GRANT %I TO %I', g, r)
FROM (VALUES (:'relay_group', :'relay_role'), (:'worker_group', :'worker_role'), (:'api_group', :'api_role')) AS m(g, r)
WHERE NOT pg_has_role(r, g, 'MEMBER') \gexec

\if :{?relay_password}
ALTER ROLE :"relay_role" PASSWORD :'relay_password';
\endif
\if :{?worker_password}
ALTER ROLE :"worker_role" PASSWORD :'worker_password';
\endif
\if :{?api_password}
ALTER ROLE :"api_role" PASSWORD :'api_password';
\endif

-- Tables are resolved through search_path, like the commands' own queries.
SELECT :'schema' <> 'public' AS custom_schema \gset
\if :custom_schema
SELECT format('ALTER ROLE %I IN DATABASE %I SET search_path = %I', r, current_database(), :'schema')
FROM unnest(ARRAY[:'relay_role', :'worker_role', :'api_role']) AS r \gexec
\endif

-- Nobody but the owner creates objects in the schema: PostgreSQL 15 no
-- longer grants CREATE on public to PUBLIC; older clusters (and upgraded
-- ones) still do, which would let any role plant functions or tables that
-- shadow ours.
\if :revoke_public_create
SELECT format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', :'schema')
WHERE has_schema_privilege('public', :'schema', 'CREATE') \gexec
\endif

SELECT format('GRANT CONNECT ON DATABASE %I TO %I, %I, %I', current_database(),
              :'relay_group', :'worker_group', :'api_group') \gexec
GRANT USAGE ON SCHEMA :"schema" TO :"relay_group", :"worker_group", :"api_group";

-- The relay (`cdc run`). The slot is created and read over the replication
-- protocol (REPLICATION above); pgoutput sends the outbox rows of the
-- publication, which migrate created, without a table privilege check, so
-- neither CREATE on the database nor any privilege on outbox is needed to
-- stream.
--   relay_state      SELECT, INSERT, UPDATE: the positions it confirmed (upsert)
--   outbox_rejected  SELECT, INSERT: events it refused (too large, bad rows)
--   outbox           SELECT: only for `outbox republish` run as this role; the
--                    slot already shows this role every row, so it adds no
--                    exposure
--   pg_logical_emit_message(boolean, text, text): the heartbeat; PUBLIC may
--                    run it by default, granted here in case that was revoked
-- `slot status` needs nothing more (pg_replication_slots is readable by all).
GRANT SELECT, INSERT, UPDATE ON :"schema".relay_state TO :"relay_group";
GRANT SELECT, INSERT ON :"schema".outbox_rejected TO :"relay_group";
GRANT SELECT ON :"schema".outbox TO :"relay_group";
SELECT format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure, :'relay_group')
FROM pg_proc p
WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = 'pg_logical_emit_message'
  AND p.proargtypes[1] = 'text'::regtype AND p.proargtypes[2] = 'text'::regtype
  AND NOT has_function_privilege(:'relay_group', p.oid, 'EXECUTE') \gexec

-- The worker (`worker run`): its inbox. INSERT … ON CONFLICT DO NOTHING
-- RETURNING event_id needs SELECT as well; a record republished by
-- `dlq replay` turns the event's 'dlq' row into 'applied' (ON CONFLICT DO
-- UPDATE of these two columns).
GRANT SELECT, INSERT ON :"schema".processed_events TO :"worker_group";
GRANT UPDATE (result, processed_at) ON :"schema".processed_events TO :"worker_group";

-- The worker's handlers run in the same transaction under the same role, so
-- the role also needs what each handler statement touches. Every deployment
-- grants its own handler tables, as narrowly as its statements allow (column
-- lists). `worker run` plans every handler statement at start-up and stops
-- naming the privilege it lacks. The demo handler of deploy/handlers/orders.yaml,
--   UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1,
-- reads id and writes status and updated_at:
\if :worker_demo_handlers
GRANT SELECT (id), UPDATE (status, updated_at) ON :"schema".orders TO :"worker_group";
\endif

-- The API (`api run`): orders and their events, and Idempotency-Key answers.
-- INSERT on outbox is the right to publish to any topic an aggregate_type
-- names: grant it like publishing rights (SECURITY.md).
--   orders           SELECT, INSERT: GET /orders/{id}; POST /orders (RETURNING)
--   outbox           INSERT: the order.created event, no read-back
--   api_idempotency  SELECT, INSERT, UPDATE: claim a key, replay its answer;
--                    DELETE: prune keys older than --idempotency-ttl
GRANT SELECT, INSERT ON :"schema".orders TO :"api_group";
GRANT INSERT ON :"schema".outbox TO :"api_group";
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".api_idempotency TO :"api_group";

COMMIT;

-- Summary: what each login role is and holds in this database.
SELECT r.rolname AS role, r.rolcanlogin AS login, r.rolreplication AS replication, r.rolsuper AS superuser,
       (SELECT string_agg(g.rolname, ', ') FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
        WHERE m.member = r.oid) AS member_of
FROM pg_roles r WHERE r.rolname IN (:'relay_role', :'worker_role', :'api_role') ORDER BY 1;

WITH t AS (
    SELECT grantee, table_name, privilege_type AS p FROM information_schema.role_table_grants
    WHERE grantee IN (:'relay_group', :'worker_group', :'api_group') AND table_schema = :'schema'
), c AS (
    SELECT grantee, table_name, privilege_type || ' (' || string_agg(column_name, ', ' ORDER BY column_name) || ')' AS p
    FROM information_schema.column_privileges cp
    WHERE grantee IN (:'relay_group', :'worker_group', :'api_group') AND table_schema = :'schema'
      AND NOT EXISTS (SELECT FROM t WHERE t.grantee = cp.grantee AND t.table_name = cp.table_name AND t.p = cp.privilege_type)
    GROUP BY grantee, table_name, privilege_type
)
SELECT grantee AS group_role, table_name, string_agg(p, ', ' ORDER BY p) AS privileges
FROM (SELECT * FROM t UNION ALL SELECT * FROM c) AS x GROUP BY 1, 2 ORDER BY 1, 2;

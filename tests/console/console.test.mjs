// Browser tests of `eventforge console --demo`: Playwright (playwright-core,
// no browser download) drives Debian's Chromium headless against a console
// that runs its own API, relay and workers on the local services. Each
// scenario ends with checks of the durable state made with psql and kcat
// (and the console's JSON endpoint, which reads the group's committed
// offsets from Kafka), not only with what the page shows.
//
// Run: make console-test (needs make up, make build, chromium, kcat, psql).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, copyFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const stateDir = process.env.EVENTFORGE_STATE_DIR || path.join(root, '.eventforge');
const artefacts = path.join(root, '.eventforge', 'console');
const shots = path.join(artefacts, 'screenshots');
const bin = process.env.EVENTFORGE_BIN || path.join(root, 'bin', 'eventforge');
const env = Object.fromEntries(readFileSync(path.join(stateDir, 'local.env'), 'utf8').split('\n')
  .filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
const pgURL = env.EVENTFORGE_PG_URL;
const brokers = env.EVENTFORGE_KAFKA_BROKERS;
const LAUNCH = {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
};

let consoleProc; let base; let browser; let info; let demoURL;
const pageErrors = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

function psql(sql) {
  return execFileSync('psql', ['-XAt', '-v', 'ON_ERROR_STOP=1', demoURL, '-c', sql], { encoding: 'utf8' }).trim();
}

// kcat reads a partition from the start: offset, key and event_id header.
function kcat(topic, partition) {
  const out = execFileSync('kcat', ['-b', brokers, '-C', '-t', topic, '-p', String(partition), '-e', '-q', '-f', '%o\t%k\t%h\n'],
    { encoding: 'utf8', timeout: 30000 });
  return out.split('\n').filter(Boolean).map((l) => {
    const [offset, key, headers] = l.split('\t');
    const h = Object.fromEntries((headers || '').split(',').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    return { offset: Number(offset), key, headers: h };
  });
}

async function json(p, opts) {
  const r = await fetch(base + p, opts);
  assert.ok(r.ok, `${p}: HTTP ${r.status}`);
  return r.json();
}

function track(page) {
  page.on('console', (m) => { if (m.type() === 'error') { pageErrors.push(`${page.url()}: ${m.text()}`); } });
  page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  return page;
}

async function newPage(opts = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true, ...opts });
  return track(await ctx.newPage());
}

async function cards(page) {
  return page.evaluate(() => Object.fromEntries(['order', 'outbox', 'effect', 'offset']
    .map((k) => [k, document.getElementById('card-' + k).dataset.state])));
}

async function waitStep(page, n, total, timeout = 60000) {
  await page.waitForFunction(([n, total]) => document.getElementById('status').textContent.startsWith(`Step ${n} of ${total}:`),
    [n, total], { timeout });
}

async function evidence(page) {
  return page.$$eval('#evidence li', (lis) => lis.map((li) => li.textContent));
}

async function playToEnd(page, scenario, timeout = 90000) {
  await page.goto(`${base}/?scenario=${scenario}`);
  await page.click('#play');
  await page.waitForSelector('#outcome:not([hidden])', { timeout });
  const run = await json('/api/run');
  assert.equal(run.status, 'done', run.error);
  return run;
}

// The order's facts as the console reads them (committed offset from Kafka).
async function facts(orderID) {
  return (await json(`/api/order?id=${encodeURIComponent(orderID)}`)).facts;
}

async function axeScan(page) {
  await page.addScriptTag({ path: path.join(here, 'node_modules', 'axe-core', 'axe.min.js') });
  const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

function demoProcesses() {
  const id = info.database.replace('console_', '');
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n')
    .filter((l) => l.trim() && !l.includes('ps -eo'))
    .map((l) => `${l} ${pgURLOf(Number(l.trim().split(/\s+/)[0]))}`)
    .filter((l) => l.includes(id));
}

// pgURLOf is the PostgreSQL URL a process got in its environment (the demo
// passes it there, never in the arguments), or ''.
function pgURLOf(pid) {
  try {
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return (env.find((kv) => kv.startsWith('EVENTFORGE_PG_URL=')) || '').slice('EVENTFORGE_PG_URL='.length);
  } catch {
    return '';
  }
}


// Kafka's murmur2 (the Java client's default partitioner), written here from
// the Java source so the test does not trust the console's own.
function murmur2(key) {
  const b = Buffer.from(key, 'utf8');
  const m = 0x5bd1e995;
  let h = 0x9747b28c ^ b.length;
  const n4 = b.length >> 2;
  for (let i = 0; i < n4; i++) {
    let k = b[i * 4] | (b[i * 4 + 1] << 8) | (b[i * 4 + 2] << 16) | (b[i * 4 + 3] << 24);
    k = Math.imul(k, m); k ^= k >>> 24; k = Math.imul(k, m);
    h = Math.imul(h, m); h ^= k;
  }
  const t = n4 * 4;
  switch (b.length & 3) {
    case 3: h ^= b[t + 2] << 16; // falls through
    case 2: h ^= b[t + 1] << 8; // falls through
    case 1: h ^= b[t]; h = Math.imul(h, m);
  }
  h ^= h >>> 13; h = Math.imul(h, m); h ^= h >>> 15;
  return h;
}
const partitionOf = (key, n) => (murmur2(key) & 0x7fffffff) % n;

// The topic's partition count from the broker's metadata (kcat -L).
function topicPartitions(topic) {
  const md = JSON.parse(execFileSync('kcat', ['-b', brokers, '-L', '-t', topic, '-J'], { encoding: 'utf8', timeout: 30000 }));
  return md.topics[0].partitions.length;
}

// The demo's processes from ps: name (its PostgreSQL application_name, or
// relay), pid and metrics address.
function demoProcs() {
  return demoProcesses().map((l) => {
    const pid = Number(l.trim().split(/\s+/)[0]);
    const metrics = (/--metrics-addr (\S+)/.exec(l) || [])[1];
    const name = / cdc run /.test(l) ? 'relay' : (/application_name=([\w-]+)/.exec(l) || [])[1];
    return { pid, metrics, name };
  }).filter((p) => p.metrics && p.name);
}

// A worker's own view of its assignment: eventforge_worker_assigned_partitions.
async function assignedGauge(addr) {
  const text = await (await fetch(`http://${addr}/metrics`)).text();
  const m = /^eventforge_worker_assigned_partitions (\S+)$/m.exec(text);
  return m ? Number(m[1]) : -1;
}

// What the diagram shows of the topic and the group.
async function diagramGroup(page) {
  return page.evaluate(() => ({
    parts: [...document.querySelectorAll('#diagram [data-partition]')].map((g) => ({ p: Number(g.dataset.partition), owner: g.dataset.owner, text: g.querySelector('text').textContent.trim() })),
    members: [...document.querySelectorAll('#diagram [data-member]')].map((g) => ({ name: g.dataset.member, parts: g.dataset.partitions ? g.dataset.partitions.split(',').map(Number) : [] })),
  }));
}

// ownersAgree waits until the diagram's owners are the group's assignment:
// every partition drawn once, owned by the member listing it, and each
// member's partition count what one running worker itself reports.
async function ownersAgree(page, workers, timeout = 20000) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    const d = await diagramGroup(page);
    const gauges = (await Promise.all(workers.map((w) => assignedGauge(w.metrics).catch(() => -1)))).sort();
    const counts = d.members.map((m) => m.parts.length).sort();
    const listed = d.members.flatMap((m) => m.parts).sort((a, b) => a - b);
    const owned = d.parts.every((p) => d.members.some((m) => m.name === p.owner && m.parts.includes(p.p)));
    last = { d, gauges, counts };
    if (owned && JSON.stringify(listed) === JSON.stringify(d.parts.map((p) => p.p)) && JSON.stringify(counts) === JSON.stringify(gauges)) { return d; }
    assert.ok(Date.now() < deadline, 'diagram owners = group assignment: ' + JSON.stringify(last));
    await new Promise((r) => setTimeout(r, 300));
  }
}

// The current node of the diagram (aria-current="location") and the
// partitions marked.
async function marked(page) {
  return page.evaluate(() => ({
    at: document.querySelector('#diagram [aria-current="location"]')?.dataset.node || '',
    partitions: [...document.querySelectorAll('#diagram [data-partition][aria-current]')].map((g) => g.querySelector('text').textContent.trim()),
  }));
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  consoleProc = spawn(bin, ['console', '--demo', '--http-addr', `127.0.0.1:${port}`, '--state-dir', path.join(root, '.eventforge'),
    '--pg-url', pgURL, '--kafka-brokers', brokers], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  consoleProc.stderr.on('data', (d) => { log += d; });
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('console did not start: ' + log)), 60000);
    consoleProc.stdout.on('data', (d) => { if (String(d).includes('eventforge console: http://')) { clearTimeout(t); resolve(); } });
    consoleProc.on('exit', (code) => { clearTimeout(t); reject(new Error(`console exited ${code}: ${log}`)); });
  });
  info = await json('/api/info');
  const u = new URL(pgURL);
  u.pathname = '/' + info.database;
  demoURL = u.toString();
  browser = await chromium.launch(LAUNCH);
});

after(async () => {
  if (browser) { await browser.close(); }
  if (consoleProc && consoleProc.exitCode === null) {
    consoleProc.kill('SIGTERM');
    await new Promise((r) => consoleProc.once('exit', r));
  }
});

const J = (order, outbox, effect, offset) => ({ order, outbox, effect, offset });
const journeyStates = [
  J('not-created', 'not-written', 'effects-0', 'not-published'),
  J('not-created', 'not-written', 'effects-0', 'not-published'),
  J('created', 'written', 'effects-0', null),
  J('created', 'written', 'effects-0', null), // received from the slot; the broker's ack may still be on its way
  J('created', 'written', 'effects-0', 'not-committed'),
  J('created', 'written', 'effects-0', 'not-committed'),
  J('created', 'written', 'effects-0', 'not-committed'),
  J('created', 'written', 'effects-0', 'not-committed'),
  J('processed', 'written', 'effects-1', null), // the offset commit may follow within the same instant
  J('processed', 'written', 'effects-1', 'committed'),
];

// diagramAtPublish checks the diagram once the order is published: one node
// per partition of the topic (as the broker says), the order's partition
// marked where murmur2 of the key puts it and where kcat finds the record,
// and each partition's owner the group's assignment.
async function diagramAtPublish(page) {
  const id = (await json('/api/run')).order_id;
  const n = topicPartitions(info.topic);
  await page.waitForFunction((n) => document.querySelectorAll('#diagram [data-partition]').length === n, n, { timeout: 10000 });
  const d = await diagramGroup(page);
  assert.deepEqual(d.parts.map((p) => p.text), Array.from({ length: n }, (_, i) => `p${i}`), 'partition nodes p0..pN-1');
  const want = partitionOf(id, n);
  assert.deepEqual(await marked(page), { at: `p${want}`, partitions: [`p${want}`] }, 'the event is at its key\'s partition');
  assert.equal(kcat(info.topic, want).filter((r) => r.key === id).length, 1, 'kcat finds the record in the marked partition');
  assert.match(await page.textContent('#diagram [data-step="murmur2"]'), new RegExp(`murmur2\\(key\\) → p${want}$`));
  await ownersAgree(page, demoProcs().filter((p) => /^worker-\d/.test(p.name)));
  assert.equal((await diagramGroup(page)).members.length, 2, 'two members in the group');
}

test('journey: every step shows the real state, then the durable rows and offsets agree', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=journey`);
  let sawAnimation = false;
  for (let i = 1; i <= 10; i++) {
    await page.click('#next');
    await waitStep(page, i, 10);
    sawAnimation ||= await page.evaluate(() => document.getAnimations().length > 0);
    const want = journeyStates[i - 1];
    const got = await cards(page);
    for (const k of Object.keys(want)) {
      if (want[k] !== null) { assert.equal(got[k], want[k], `step ${i} card ${k}`); }
    }
    const ev = (await evidence(page)).join('\n');
    if (i === 2) { assert.match(ev, /rows another session sees: orders 0, outbox 0/); assert.match(ev, /has written to: orders, outbox/); }
    if (i === 3) { assert.match(ev, /API answered 201/); assert.match(ev, /orders 1, outbox 1/); }
    if (i === 6) { assert.match(ev, /confirmed_flush_lsn = \S+, past the transaction's end/); }
    if (i === 8) { assert.match(ev, /has written to: orders, processed_events/); assert.match(ev, /inbox rows another session sees: 0/); }
    if (i === 9) { assert.match(ev, /inbox rows 1, business changes 1/); }
    if (i === 1) { await page.waitForFunction(() => document.querySelector('#diagram [aria-current="location"]')?.dataset.node === 'api'); }
    if (i === 5) { await diagramAtPublish(page); }
    // What the step changed is marked on the diagram: the rows, the record, the inbox row.
    // (the record may reach Kafka at step 4 or 5, and step 9 may see the
    // offset commit that follows within the same instant: partitions aside)
    const changes = { 3: ['tables'], 9: ['tables', 'inbox'] };
    if (changes[i]) {
      await page.waitForFunction((want) => {
        const got = [...document.querySelectorAll('#diagram [data-changed]')].map((g) => g.dataset.node).filter((n) => !/^p\d/.test(n));
        return JSON.stringify(got) === JSON.stringify(want);
      }, changes[i], { timeout: 5000 }).catch(async (e) => {
        const got = await page.$$eval('#diagram [data-changed]', (gs) => gs.map((g) => g.dataset.node));
        assert.fail(`step ${i}: changed ${JSON.stringify(got)}, want ${JSON.stringify(changes[i])} (${e.message})`);
      });
      assert.match(await page.textContent('#diagram-text'), /^Changed at this step/);
    }
    if (i === 10) { await page.screenshot({ path: path.join(shots, 'console-desktop.png'), fullPage: true }); }
  }
  assert.ok(sawAnimation, 'with motion allowed, a step animates the journey marker');
  const run = await json('/api/run');
  const id = run.order_id;
  const step5 = run.snapshots[4].evidence.join('\n');
  const partition = Number(/partition (\d+) of/.exec(step5)[1]);

  assert.equal(psql(`SELECT status FROM orders WHERE id = '${id}'`), 'processed');
  const eventID = psql(`SELECT event_id FROM outbox WHERE aggregate_id = '${id}'`);
  assert.match(eventID, /^[0-9a-f-]{36}$/);
  assert.equal(psql(`SELECT count(*) FROM processed_events WHERE event_id = '${eventID}'`), '1');
  assert.equal(psql(`SELECT count(*) FROM console_effects WHERE order_id = '${id}'`), '1');
  const recs = kcat(info.topic, partition).filter((r) => r.key === id);
  assert.equal(recs.length, 1, 'one record, in the partition the page showed');
  assert.equal(recs[0].headers.event_id, eventID);
  const f = await facts(id);
  assert.equal(f.partition, partition);
  assert.ok(f.committed_offset > recs[0].offset, `group offset ${f.committed_offset} past ${recs[0].offset}`);

  // Step back shows what each earlier step read.
  await page.click('#back');
  await waitStep(page, 9, 10);
  for (let i = 0; i < 6; i++) { await page.keyboard.press('ArrowLeft'); }
  await waitStep(page, 3, 10);
  assert.deepEqual(await cards(page).then((c) => [c.order, c.outbox, c.effect]), ['created', 'written', 'effects-0']);

  // An operator looks the order up: the cards show its state now, re-read live.
  await page.goto(`${base}/?order=${encodeURIComponent(id)}`);
  await page.waitForFunction(() => /read at/.test(document.getElementById('status').textContent));
  const first = await page.textContent('#status');
  await page.waitForFunction((t) => document.getElementById('status').textContent !== t, first, { timeout: 10000 });
  assert.deepEqual(await cards(page), J('processed', 'written', 'effects-1', 'committed'));
  await page.evaluate(() => window.eventforgeConsole.leave());
  await page.context().close();
});

test('pause and replay, on the rollback scenario: nothing is published', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=rollback`);
  await page.click('#play');
  await waitStep(page, 2, 4);
  await page.click('#pause');
  const paused = await page.evaluate(() => window.eventforgeConsole.debug());
  await page.waitForFunction(() => !window.eventforgeConsole.debug().busy);
  const step = await page.evaluate(() => window.eventforgeConsole.debug().snapshots);
  await new Promise((r) => setTimeout(r, 2500)); // longer than the play delay
  const later = await page.evaluate(() => window.eventforgeConsole.debug());
  assert.equal(paused.playing, false);
  assert.equal(later.timers, 0, 'no timer left after pause');
  assert.equal(later.snapshots, step, 'paused: no step taken');
  const first = (await json('/api/run')).order_id;

  await page.click('#replay');
  await page.waitForSelector('#outcome:not([hidden])', { timeout: 60000 });
  const run = await json('/api/run');
  assert.notEqual(run.order_id, first, 'replay starts a new run with a new order');
  assert.equal(run.status, 'done');
  assert.deepEqual(await cards(page), J('not-created', 'not-written', 'effects-0', 'not-published'));
  for (const id of [first, run.order_id]) {
    assert.equal(psql(`SELECT count(*) FROM orders WHERE id = '${id}'`), '0');
    assert.equal(psql(`SELECT count(*) FROM outbox WHERE aggregate_id = '${id}'`), '0');
  }
  const f = await facts(run.order_id);
  assert.equal(kcat(info.topic, f.partition).filter((r) => r.key === run.order_id).length, 0, 'no record with the key');
  assert.match(run.snapshots[2].evidence.join('\n'), /API answered 5\d\d/);
  await page.context().close();
});

test('relay dies after the ack, before confirming: a duplicate with the same id, one effect', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=relay-crash`);
  await page.click('#next'); await waitStep(page, 1, 5);
  const armed = (await json('/api/processes')).find((p) => p.name === 'relay').starts; // restarted with the failpoint
  for (let i = 2; i <= 3; i++) { await page.click('#next'); await waitStep(page, i, 5); }
  // On the diagram: the relay that died is greyed out and the event is at it.
  await page.waitForFunction(() => {
    const r = document.querySelector('#diagram [data-node="relay"]');
    return r && r.classList.contains('down') && r.getAttribute('aria-current') === 'location';
  }, null, { timeout: 10000 });
  assert.match(await page.textContent('#diagram-text'), /Relay relay: stopped\. The event is here\./);
  await page.click('#play');
  await page.waitForSelector('#outcome:not([hidden])', { timeout: 90000 });
  const run = await json('/api/run');
  assert.equal(run.status, 'done', run.error);
  // The second record with the same event id shows in the order's partition.
  const n = topicPartitions(info.topic);
  const mine = `#diagram [data-partition="${partitionOf(run.order_id, n)}"]`;
  await page.waitForFunction((sel) => !document.querySelector('#diagram [data-node="relay"]').classList.contains('down') && document.querySelector(sel)?.hasAttribute('aria-current'), mine, { timeout: 10000 });
  await page.waitForFunction((n) => document.querySelector('#diagram [data-node="relay"]').getAttribute('aria-label').endsWith(`(start ${n})`), armed + 1,
    { timeout: 5000 }); // the relay is shown restarted
  assert.match(await page.getAttribute(mine, 'aria-label'), /, 2 records of this event(,|$)/);
  assert.equal(await page.textContent(`${mine} .badge`), '×2');
  await page.screenshot({ path: path.join(shots, 'console-scenario.png'), fullPage: true });
  assert.match(run.snapshots[2].evidence.join('\n'), /failpoint cdc\/after-ack-before-confirm/);
  assert.match(run.snapshots[2].evidence.join('\n'), /still before the transaction's end/);
  const id = run.order_id;
  const f = await facts(id);
  const recs = kcat(info.topic, f.partition).filter((r) => r.key === id);
  assert.equal(recs.length, 2, 'published twice');
  assert.equal(recs[0].headers.event_id, recs[1].headers.event_id);
  assert.equal(psql(`SELECT count(*) FROM processed_events WHERE event_id = '${recs[0].headers.event_id}'`), '1');
  assert.equal(psql(`SELECT count(*) FROM console_effects WHERE order_id = '${id}'`), '1');
  assert.equal(psql(`SELECT status FROM orders WHERE id = '${id}'`), 'processed');
  assert.ok(f.committed_offset > recs[1].offset);
  assert.deepEqual(await cards(page), J('processed', 'written', 'effects-1', 'committed'));
  await page.context().close();
});

test('worker dies after the commit, before the offset: redelivered, the inbox stops a second effect', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=worker-crash`);
  for (let i = 1; i <= 3; i++) { await page.click('#next'); await waitStep(page, i, 4); }
  // On the diagram: the worker that died greyed out, the event at a worker.
  await page.waitForSelector('#diagram [data-node="down-worker-1"].down', { timeout: 10000 });
  assert.equal((await marked(page)).partitions.length, 1, 'the order\'s partition is marked');
  await page.click('#play');
  await page.waitForSelector('#outcome:not([hidden])', { timeout: 90000 });
  const run = await json('/api/run');
  assert.equal(run.status, 'done', run.error);
  const died = run.snapshots[2];
  assert.match(died.evidence.join('\n'), /failpoint worker\/after-commit-before-offset/);
  assert.equal(died.cards.offset.state, 'not-committed', 'the offset was not committed at the crash');
  assert.equal(died.cards.effect.state, 'effects-1');
  const id = run.order_id;
  const f = await facts(id);
  const recs = kcat(info.topic, f.partition).filter((r) => r.key === id);
  assert.equal(recs.length, 1);
  assert.equal(psql(`SELECT count(*) FROM processed_events WHERE event_id = '${recs[0].headers.event_id}'`), '1');
  assert.equal(psql(`SELECT count(*) FROM console_effects WHERE order_id = '${id}'`), '1');
  assert.ok(f.committed_offset > recs[0].offset);
  const procs = await json('/api/processes');
  for (const p of procs.filter((p) => p.name !== 'worker-twin')) { assert.ok(p.running && !p.failpoint, JSON.stringify(p)); }
  await page.context().close();
});

test('a duplicate delivered concurrently to two workers: the inbox key serialises them, one effect', async () => {
  const page = await newPage();
  const run = await playToEnd(page, 'concurrent-duplicate');
  assert.match(run.snapshots[2].evidence.join('\n'), /waits for transaction \d+: it inserts the same \(consumer, event_id\)/);
  const id = run.order_id;
  const f = await facts(id);
  const recs = kcat(info.topic, f.partition).filter((r) => r.key === id);
  assert.equal(recs.length, 1, 'published once');
  assert.equal(psql(`SELECT count(*) FROM processed_events WHERE event_id = '${recs[0].headers.event_id}'`), '1');
  assert.equal(psql(`SELECT count(*) FROM console_effects WHERE order_id = '${id}'`), '1');
  assert.ok(f.committed_offset > recs[0].offset);
  await page.context().close();
});

test('retries exhausted: dead letter before the offset moves, then replay keeping the id', async () => {
  const page = await newPage();
  const run = await playToEnd(page, 'dead-letter');
  assert.equal(run.snapshots[2].node, 'dlq', 'the dead-letter step shows the event at the DLQ');
  await page.click('#back'); await page.click('#back');
  await waitStep(page, 3, 5);
  await page.waitForFunction(() => document.querySelector('#diagram [aria-current="location"]')?.dataset.node === 'dlq');
  assert.match(await page.getAttribute('#diagram [data-node="dlq"]', 'aria-label'), /1 of this event(,|$)/);
  const dl = run.snapshots[2];
  assert.equal(dl.cards.order.state, 'not-created');
  assert.equal(dl.cards.offset.state, 'committed', 'offset committed after the dead letter');
  assert.equal(dl.facts.dead_letters.length, 1);
  const id = run.order_id;
  const f = await facts(id);
  const eventID = f.event_id;
  const letters = [];
  for (let p = 0; p < f.partitions; p++) { letters.push(...kcat(info.topic + '.dlq', p).filter((r) => r.key === id)); }
  assert.equal(letters.length, 1, 'one dead letter');
  assert.equal(letters[0].headers.event_id, eventID);
  assert.equal(letters[0].headers['x-eventforge-attempts'], '3');
  const recs = kcat(info.topic, f.partition).filter((r) => r.key === id);
  assert.equal(recs.length, 2, 'the original and the replay');
  assert.ok(recs.every((r) => r.headers.event_id === eventID), 'replay keeps the event id');
  assert.equal(psql(`SELECT count(*) FROM processed_events WHERE event_id = '${eventID}'`), '1');
  assert.equal(psql(`SELECT count(*) FROM console_effects WHERE order_id = '${id}'`), '1');
  assert.equal(psql(`SELECT status FROM orders WHERE id = '${id}'`), 'processed');
  assert.ok(f.committed_offset > recs[1].offset);
  await page.context().close();
});

test('phone width 360: readable without horizontal scrolling, accessibility scan clean', async () => {
  const page = await newPage({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
  await page.goto(`${base}/?scenario=dead-letter`); // the finished run of the test before
  await page.waitForSelector('#outcome:not([hidden])');
  await page.waitForFunction(() => document.getElementById('sig-slot-lag').textContent !== '…');
  await page.waitForFunction(() => document.querySelectorAll('#diagram [data-partition]').length > 0);
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), 'no horizontal scroll at 360 px');
  const box = await page.$eval('#diagram', (e) => { const r = e.getBoundingClientRect(); return { left: r.left, right: r.right, width: r.width }; });
  assert.ok(box.left >= 0 && box.right <= 360 && box.width >= 300, 'the diagram fits the phone: ' + JSON.stringify(box));
  assert.deepEqual(await axeScan(page), []);
  await page.screenshot({ path: path.join(shots, 'console-phone.png'), fullPage: true });
  await page.context().close();
});

test('leaving or switching scenario mid-run stops it and leaves the demo processes healthy', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=relay-crash`);
  await page.click('#next');
  await waitStep(page, 1, 5);
  let procs = await json('/api/processes');
  assert.ok(procs.find((p) => p.name === 'relay').failpoint, 'the relay runs with its failpoint');
  await page.selectOption('#scenario', 'concurrent-duplicate'); // switches scenario: the page reloads
  await page.waitForURL(/scenario=concurrent-duplicate/);
  await page.click('#next');
  await waitStep(page, 1, 5);
  procs = await json('/api/processes');
  assert.ok(!procs.find((p) => p.name === 'relay').failpoint, 'switching restored the relay without failpoint');
  assert.ok(procs.find((p) => p.name === 'worker-twin').running);
  const gates = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted"
    + ' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())';
  assert.equal(psql(gates), '1', 'the console holds its gate');
  await page.goto('about:blank'); // leaving: pagehide sends the stop beacon
  const deadline = Date.now() + 30000;
  for (;;) {
    procs = await json('/api/processes');
    const healthy = procs.every((p) => (p.name === 'worker-twin' ? !p.running : p.running && !p.failpoint));
    if (healthy && (await json('/api/run')).status === 'stopped') { break; }
    assert.ok(Date.now() < deadline, 'demo processes healthy after leaving: ' + JSON.stringify(procs));
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(psql(gates), '0', 'gates released');
  await page.context().close();
});

test('reduced motion: no animation runs, the same information is shown', async () => {
  const page = await newPage({ reducedMotion: 'reduce' });
  await page.goto(`${base}/?scenario=rollback`);
  await page.click('#next');
  await waitStep(page, 1, 4);
  assert.equal(await page.evaluate(() => document.getAnimations().length), 0);
  assert.equal((await cards(page)).order, 'not-created');
  await page.waitForFunction(() => document.querySelector('#diagram [aria-current="location"]')?.dataset.node === 'api');
  await page.click('#next');
  await waitStep(page, 2, 4);
  await page.waitForFunction(() => document.querySelector('#diagram [aria-current="location"]')?.dataset.node === 'tables');
  assert.equal(await page.evaluate(() => document.getAnimations().length), 0);
  await page.evaluate(() => window.eventforgeConsole.leave());
  await page.context().close();
});

test('desktop accessibility scan and keyboard use', async () => {
  const page = await newPage();
  await page.goto(`${base}/?scenario=journey`);
  await page.waitForFunction(() => document.querySelectorAll('#diagram [data-partition]').length > 0);
  assert.deepEqual(await axeScan(page), []);
  // The page's weight: every script and style sheet it loads, within the
  // budget docs/console.md states (40 KiB of JS + CSS, uncompressed).
  const assets = await page.evaluate(() => [...document.querySelectorAll('script[src], link[rel=stylesheet]')].map((e) => e.src || e.href));
  let weight = 0;
  for (const a of assets) { weight += (await (await fetch(a)).arrayBuffer()).byteLength; }
  assert.ok(weight <= 40 * 1024, `JS + CSS ${weight} bytes, budget 40 KiB`);
  writeFileSync(path.join(artefacts, 'page-weight.txt'), `${weight} bytes of JS + CSS: ${assets.map((a) => new URL(a).pathname).join(', ')}\n`);
  await page.goto(`${base}/steps?scenario=journey`);
  assert.deepEqual(await axeScan(page), []);
  await page.goto(`${base}/?scenario=rollback`);
  // Every control is reachable with Tab and labelled.
  const names = await page.$$eval('button:not([hidden]), select, a[href]', (els) => els.map((e) => e.getAttribute('aria-label') || e.labels?.[0]?.textContent || e.textContent.trim()));
  assert.ok(names.every((n) => n && n.length > 0), JSON.stringify(names));
  await page.focus('#next');
  await page.keyboard.press('Enter');
  await waitStep(page, 1, 4);
  await page.evaluate(() => window.eventforgeConsole.leave());
  await page.context().close();
});

test('read all steps without scripts: the server runs the scenario and renders every step', async () => {
  const page = await newPage({ javaScriptEnabled: false });
  await page.goto(`${base}/?scenario=rollback`);
  assert.ok(await page.isVisible('a[href="/steps?scenario=rollback"]'), 'the text mode is offered');
  assert.ok(!(await page.isVisible('#next')), 'controls that need scripts are hidden without them');
  await page.goto(`${base}/steps?scenario=rollback`);
  await Promise.all([page.waitForURL(/\/steps\?scenario=rollback$/, { timeout: 60000 }), page.click('form button[type=submit]')]);
  const text = await page.textContent('main');
  assert.equal((text.match(/Read at /g) || []).length, 4, 'every step shows what it read');
  assert.equal((text.match(/On the diagram, the event is at /g) || []).length, 4, 'and where the diagram marks the event');
  assert.match(text, /API answered 5\d\d/);
  const run = await json('/api/run');
  assert.equal(psql(`SELECT count(*) FROM outbox WHERE aggregate_id = '${run.order_id}'`), '0');
  await page.context().close();
});

// A read-only console pointed at the demo's pipeline, as an operator would
// run it against theirs: only addresses, no demo.
// A second relay on the demo's slot waits as a hot standby while the demo's
// relay streams.
async function startStandby() {
  const addr = `127.0.0.1:${await freePort()}`;
  const proc = spawn(bin, ['cdc', 'run', '--slot', info.slot, '--topic-prefix', info.topic.slice(0, -'orders'.length),
    '--topic-partitions', '4', '--metrics-addr', addr, '--shutdown-timeout', '5s', '--log-level', 'warn',
    '--pg-url', demoURL, '--kafka-brokers', brokers], { stdio: 'ignore' });
  const deadline = Date.now() + 20000;
  for (;;) {
    const text = await fetch(`http://${addr}/metrics`).then((r) => r.text()).catch(() => '');
    if (/^eventforge_cdc_standby 1$/m.test(text)) { return { proc, metrics: addr }; }
    assert.ok(Date.now() < deadline && proc.exitCode === null, 'the second relay waits as a standby');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startReadOnly(standby) {
  const port = await freePort();
  const procs = demoProcs();
  const relay = procs.find((p) => p.name === 'relay');
  const workers = procs.filter((p) => /^worker-\d/.test(p.name));
  const proc = spawn(bin, ['console', '--http-addr', `127.0.0.1:${port}`, '--pg-url', demoURL, '--kafka-brokers', brokers,
    '--slot', info.slot, '--topic', info.topic, '--group', info.group, '--consumer', info.consumer,
    '--relay-metrics-addr', `${relay.metrics},${standby.metrics}`, '--worker-metrics-addrs', workers.map((w) => w.metrics).join(','), '--api-url', info.api],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('read-only console did not start: ' + log)), 30000);
    proc.stdout.on('data', (d) => { if (String(d).includes('eventforge console: http://')) { clearTimeout(t); resolve(); } });
    proc.on('exit', (code) => { clearTimeout(t); reject(new Error(`read-only console exited ${code}: ${log}`)); });
  });
  return { proc, url: `http://127.0.0.1:${port}`, workers };
}

async function edgeRate(page, edge) {
  const t = await page.textContent(`#diagram [data-edge="${edge}"]`);
  const m = /([\d.]+)\/s$/.exec(t);
  return m ? Number(m[1]) : null;
}

test('live read-only diagram: relay and standby, rates rise while orders are written, a partition shows its last records, ownership moves when a worker stops', async () => {
  const standby = await startStandby();
  let ro; let page;
  try {
    ro = await startReadOnly(standby);
    page = await newPage();
    await page.goto(ro.url + '/');
    await page.waitForFunction(() => window.eventforgeConsole.debug().liveReads >= 2, null, { timeout: 15000 });
    // The relay and its standby, each with the state its own metrics give.
    const relays = await page.$$eval('#diagram [data-node^="relay"]', (gs) => gs.map((g) => g.getAttribute('aria-label')));
    const relayAddr = demoProcs().find((p) => p.name === 'relay').metrics;
    assert.deepEqual(relays, [`relay ${relayAddr}: active`, `relay ${standby.metrics}: standby`]);
    const n = topicPartitions(info.topic);
    assert.equal((await diagramGroup(page)).parts.length, n);
    await ownersAgree(page, ro.workers);
    const before = await edgeRate(page, 'published');
    assert.ok(before !== null && before < 1, `idle: published ${before}/s`);

    // Write orders through the demo's API until the diagram's rates rise.
    let sent = 0; let rose = null;
    const deadline = Date.now() + 15000;
    while (!rose) {
      const key = `order-live-${Date.now()}-${sent++}`;
      const r = await fetch(info.api + '/orders', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ id: key, customer: 'console-test', amount: 100, currency: 'EUR' }) });
      assert.equal(r.status, 201);
      const pub = await edgeRate(page, 'published'); const con = await edgeRate(page, 'consumed');
      if (pub > before && con > 0) {
        rose = { pub, con, sent };
        await page.screenshot({ path: path.join(shots, 'console-live.png'), fullPage: true });
      }
      assert.ok(Date.now() < deadline, `rates did not rise after ${sent} orders: published ${pub}, consumed ${con}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const reads = await page.evaluate(() => window.eventforgeConsole.debug().liveReads);
    assert.ok(reads >= 3, 'updated without a reload: ' + reads + ' reads');

    // A partition opened shows its last records, as kcat reads them.
    const last = `order-live-${Date.now()}-last`;
    await fetch(info.api + '/orders', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ id: last, customer: 'console-test', amount: 100, currency: 'EUR' }) });
    const p = partitionOf(last, n);
    let recs;
    for (const t0 = Date.now(); ; await new Promise((r) => setTimeout(r, 200))) {
      recs = kcat(info.topic, p);
      if (recs.some((r) => r.key === last)) { break; }
      assert.ok(Date.now() - t0 < 10000, 'the last order reached its partition');
    }
    await page.focus(`#diagram [data-partition="${p}"]`);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#partition-panel:not([hidden]) #partition-records tr');
    const rows = await page.$$eval('#partition-records tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const want = recs.slice(-rows.length).reverse().map((r) => [String(r.offset), r.key, r.headers.event_id]);
    assert.deepEqual(rows, want, 'last records of the partition, newest first');
    assert.equal(rows[0][1], last);
    assert.deepEqual(await axeScan(page), []);

    // A worker stops: the group rebalances and the diagram shows the other
    // member owning every partition.
    const [gone, stays] = ro.workers;
    const changesBefore = await page.evaluate(() => document.getElementById('diagram-text').textContent);
    process.kill(gone.pid, 'SIGTERM');
    await page.waitForFunction((n) => {
      const ms = [...document.querySelectorAll('#diagram [data-member]')];
      return ms.length === 1 && ms[0].dataset.partitions.split(',').length === n;
    }, n, { timeout: 30000 });
    await ownersAgree(page, [stays]);
    assert.equal(await assignedGauge(stays.metrics), n, 'the remaining worker owns every partition');
    const text = await page.textContent('#diagram-text');
    assert.match(text, /assignment changes seen [1-9]/, 'the rebalance is counted');
    assert.notEqual(text, changesBefore);
    await page.evaluate(() => window.eventforgeConsole.leave());
  } finally {
    if (page) { await page.context().close(); }
    const procs = [standby.proc, ro && ro.proc].filter((p) => p && p.exitCode === null);
    procs.forEach((p) => p.kill('SIGTERM'));
    await Promise.all(procs.map((p) => new Promise((r) => p.once('exit', r))));
    await json('/api/run/stop', { method: 'POST' }); // the demo restarts the stopped worker
  }
});

test('no console errors; stopping the console leaves no process, database or slot behind', async () => {
  assert.deepEqual(pageErrors, []);
  await json('/api/run/stop', { method: 'POST' });
  consoleProc.kill('SIGTERM');
  await new Promise((r) => consoleProc.once('exit', r));
  assert.deepEqual(demoProcesses(), []);
  const left = execFileSync('psql', ['-XAt', pgURL, '-c',
    `SELECT (SELECT count(*) FROM pg_database WHERE datname = '${info.database}') + (SELECT count(*) FROM pg_replication_slots WHERE slot_name = '${info.slot}')`],
  { encoding: 'utf8' }).trim();
  assert.equal(left, '0');
  if (process.env.UPDATE_SCREENSHOTS) {
    for (const f of ['console-desktop.png', 'console-phone.png', 'console-live.png', 'console-scenario.png']) { copyFileSync(path.join(shots, f), path.join(root, 'docs', 'img', f)); }
  }
});

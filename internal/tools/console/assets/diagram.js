// EventForge console: the architecture as an inline SVG drawn from what the
// console reads (GET /api/topology) and, during a run, from the step's facts.
// No library: the nodes are built with the DOM. Every value shown is also in
// the text equivalent (#diagram-text) beside it.
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var W = 360;
  var topo = null; var mark = null; var procs = null; var pulseUntil = 0;
  var svg; var textList; var onPartition = function () {};

  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }
  function num(v, unit) { return v === null || v === undefined ? '?' : (Math.round(v * 10) / 10) + (unit || ''); }
  function bytes(v) { return v === null || v === undefined ? '?' : v < 1024 ? v + ' B' : v < 1048576 ? Math.round(v / 1024) + ' KiB' : Math.round(v / 1048576) + ' MiB'; }

  // node draws a labelled box; lines are its text lines (the first bold).
  function node(id, x, y, w, h, lines, label, cls) {
    var g = el('g', { 'data-node': id, role: 'group', 'aria-label': label, class: 'node ' + (cls || '') }, svg);
    el('rect', { x: x, y: y, width: w, height: h, rx: 5 }, g);
    // A trailing space keeps the lines apart in the text assistive
    // technology reads from the node (SVG does not draw it).
    lines.forEach(function (t, i) { el('text', { x: x + 6, y: y + 14 + i * 12, class: i === 0 ? 'title' : '' }, g, i < lines.length - 1 ? t + ' ' : t); });
    return g;
  }
  function edge(x1, y1, x2, y2, label, id) {
    el('line', { x1: x1, y1: y1, x2: x2, y2: y2, class: 'edge', 'marker-end': 'url(#arrow)' }, svg);
    if (label) { el('text', { x: Math.max(x1, x2) + 4, y: (y1 + y2) / 2 + 4, class: 'edge-label', 'data-edge': id }, svg, label); }
  }

  // where returns the node the event is at and the order's partition.
  function where() {
    var f = mark && mark.facts;
    var at = mark && mark.node;
    if (!at && f) { at = f.inbox_rows > 0 ? 'inbox' : (f.records || []).length ? 'partition' : f.event_id ? 'tables' : 'api'; }
    var part = f && f.records && f.records.length ? f.partition : null;
    return { at: at || '', partition: part, facts: f };
  }

  // relayState is the relay's state, with the demo's process (stopped, or
  // its pid and how many times it was started: a restart shows).
  function relayState(r) {
    var p = procs && procs.find(function (x) { return x.name === r.name; });
    if (!p) { return r.state; }
    return p.running ? r.state + ' · pid ' + p.pid + ' (start ' + p.starts + ')' : 'stopped';
  }

  // draw redraws everything; pulse marks the event's node with a short
  // animation (never with reduced motion: the CSS turns animations off).
  function draw(pulse) {
    if (!svg) { return; }
    var focused = document.activeElement && svg.contains(document.activeElement) ? document.activeElement.getAttribute('data-node') : null;
    svg.textContent = '';
    var w = where();
    // c is what every part draws from: the topology, where the event is,
    // its facts and the text equivalent being written.
    var c = { t: topo || { partitions: [], members: [], relays: [], slot: {}, dlq: {}, rates: {} }, w: w, f: w.facts, items: [] };
    c.rate = c.t.rates || {};
    c.cur = function (g, id) { if (w.at === id) { g.setAttribute('aria-current', 'location'); } };
    c.here = function (id) { return w.at === id ? ' The event is here.' : ''; };
    var m = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto' }, el('defs', {}, svg));
    el('path', { d: 'M0 0L10 5L0 10z' }, m);
    drawSources(c);
    drawRelays(c);
    var y = drawSinks(c, drawGroup(c, drawTopic(c, 186)));
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + y);
    markChanged(changedNodes(c.f, mark && mark.prev), c.items);
    var current = svg.querySelector('[aria-current="location"]');
    if (pulse) { pulseUntil = Date.now() + 1600; }
    if (current && Date.now() < pulseUntil) { current.classList.add('pulse'); }
    if (focused) { var again = svg.querySelector('[data-node="' + focused + '"]'); if (again) { again.focus(); } }
    if (textList) {
      textList.textContent = '';
      c.items.forEach(function (s) { var li = document.createElement('li'); li.textContent = s; textList.appendChild(li); });
    }
  }

  // drawSources draws the API and PostgreSQL: the tables and the slot.
  function drawSources(c) {
    var f = c.f;
    c.cur(node('api', 8, 20, 80, 44, ['API', 'POST /orders'], 'API'), 'api');
    c.items.push('API: receives the order (POST /orders).' + c.here('api'));
    el('rect', { x: 94, y: 2, width: 258, height: 86, rx: 6, class: 'area' }, svg);
    el('text', { x: 100, y: 14, class: 'area-title' }, svg, 'PostgreSQL');
    var ol = f ? 'order ' + (f.status || 'none') : 'one transaction';
    var ev = f ? 'event ' + (f.event_id ? f.event_id.slice(0, 8) + '…' : 'none') : '';
    var tl = f ? ol + ', ' + ev : ol;
    c.cur(node('tables', 100, 20, 140, 62, ['orders + outbox', ol, ev], 'orders and outbox tables: ' + tl), 'tables');
    c.items.push('PostgreSQL orders and outbox, written in one transaction: ' + tl + '.' + c.here('tables'));
    var s = c.t.slot || {};
    var said = 'confirmed ' + (s.confirmed_lsn || 'unknown') + ', lag ' + bytes(s.lag_bytes) + ', retained WAL ' + bytes(s.retained_bytes);
    c.cur(node('slot', 246, 20, 100, 62, ['slot', 'conf ' + (s.confirmed_lsn || '?'), 'lag ' + bytes(s.lag_bytes), 'WAL ' + bytes(s.retained_bytes)],
      'slot ' + (s.name || '') + ': ' + said), 'slot');
    c.items.push('Slot ' + (s.name || '') + (s.active ? ' (streaming)' : ' (inactive)') + ': ' + said + '.' + c.here('slot'));
    edge(88, 42, 100, 42);
  }

  // drawRelays draws the relays, the published rate and the partitioner.
  function drawRelays(c) {
    var relays = (c.t.relays && c.t.relays.length) ? c.t.relays : [{ name: 'relay', state: 'unknown' }];
    var rw = Math.min(168, (W - 16 - (relays.length - 1) * 8) / relays.length);
    relays.forEach(function (r, i) {
      var state = relayState(r);
      var g = node(i ? 'relay-' + i : 'relay', 8 + i * (rw + 8), 108, rw, 40, [r.name, state], r.name + ': ' + state, state === 'stopped' ? 'down' : state);
      if (i === 0) { c.cur(g, 'relay'); }
      c.items.push('Relay ' + r.name + ': ' + state + '.' + (i === 0 ? c.here('relay') : ''));
    });
    edge(300, 82, 176, 108);
    edge(92, 148, 92, 184, 'published ' + num(c.rate.published_per_second, '/s'), 'published');
    c.items.push('Relay to Kafka: ' + num(c.rate.published_per_second, ' events/s') + '.');
    var f = c.f;
    if (f && f.partitions) { // the key -> murmur2 -> partition step
      el('text', { x: 176, y: 168, class: 'murmur', 'data-step': 'murmur2' }, svg, 'murmur2(key) → p' + f.partition);
      c.items.push('The relay hashes the key with murmur2: key ' + f.order_id + ' → murmur2 → p' + f.partition + ' (of ' + f.partitions + ' partitions).');
    }
  }

  // drawTopic draws the topic's partitions from y; it returns the y below.
  function drawTopic(c, y) {
    var parts = c.t.partitions || [];
    var cols = Math.min(Math.max(parts.length, 1), 6);
    var rows = Math.ceil(parts.length / cols) || 1;
    var pw = (W - 24 - (cols - 1) * 4) / cols; var ph = 44;
    var th = 20 + rows * (ph + 4);
    el('rect', { x: 8, y: y, width: W - 16, height: th, rx: 6, class: 'area' }, svg);
    el('text', { x: 14, y: y + 14, class: 'area-title' }, svg, 'topic ' + (c.t.topic || '?') + ' · ' + plural(parts.length, 'partition'));
    c.items.push('Topic ' + (c.t.topic || '?') + ': ' + plural(parts.length, 'partition') + '.');
    c.owners = {};
    (c.t.members || []).forEach(function (mb, i) { c.owners[mb.name] = i; });
    parts.forEach(function (p, i) {
      drawPartition(c, p, 12 + (i % cols) * (pw + 4), y + 20 + Math.floor(i / cols) * (ph + 4), pw, ph);
    });
    return y + th;
  }

  // drawPartition draws one partition: a button opening its last records.
  function drawPartition(c, p, x, y, pw, ph) {
    var f = c.f; var w = c.w;
    var eventHere = w.at === 'partition' && f && f.partition === p.partition;
    var mine = w.partition === p.partition || eventHere;
    var copies = mine && f && f.records ? f.records.length : 0;
    var shown = ['p' + p.partition, 'lag ' + p.lag, p.owner ? 'm' + (c.owners[p.owner] + 1) : '—'];
    if (copies) { shown[1] += ' @' + f.records[copies - 1].offset; } // the event's record offset
    // The accessible name starts with the visible text (WCAG 2.5.3).
    var label = shown.join(' ') + (copies > 1 ? ' ×' + copies : '') + ': ' + p.high_watermark + ' records, committed ' + p.committed +
      ', owner ' + (p.owner || 'none') + (copies ? ', ' + plural(copies, 'record') + ' of this event' : '');
    var g = node('p' + p.partition, x, y, pw, ph, shown, label, 'part owner-' + (p.owner ? c.owners[p.owner] % 6 : 'none'));
    g.setAttribute('data-partition', p.partition);
    g.setAttribute('data-owner', p.owner || '');
    g.setAttribute('role', 'button');
    g.setAttribute('tabindex', '0');
    if (copies > 1) { el('text', { x: x + pw - 32, y: y + 14, class: 'badge' }, g, '×' + copies); }
    if (mine) { g.setAttribute('aria-current', eventHere ? 'location' : 'true'); }
    g.addEventListener('click', function () { onPartition(p.partition); });
    g.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); onPartition(p.partition); } });
    c.items.push(label + '.' + (mine ? ' The order\'s partition' + (eventHere ? '; the event is here.' : '.') : ''));
  }

  // drawGroup draws the consumer group's members from y (and the demo's
  // stopped workers, greyed out); it returns the y below.
  function drawGroup(c, y) {
    var t = c.t; var f = c.f;
    edge(92, y, 92, y + 24, 'consumed ' + num(c.rate.consumed_per_second, '/s'), 'consumed');
    c.items.push('Kafka to the workers: ' + num(c.rate.consumed_per_second, ' events/s') + '; rebalances ' + num(t.rebalances) + ', assignment changes seen ' + (t.assignment_changes || 0) + '.');
    y += 24;
    var mem = t.members || [];
    var mw = (W - 24 - 4) / 2; var mh = 40;
    var down = (procs || []).filter(function (p) { return /^worker-\d/.test(p.name) && !p.running; }).map(function (p) { return p.name; });
    var gh = 20 + Math.max(1, Math.ceil((mem.length + down.length) / 2)) * (mh + 4);
    el('rect', { x: 8, y: y, width: W - 16, height: gh, rx: 6, class: 'area' }, svg);
    var since = t.assignment_changed_at ? Math.round((Date.parse(t.read_at) - Date.parse(t.assignment_changed_at)) / 1000) : null;
    var reb = since !== null && since < 60 ? ' · rebalanced ' + since + ' s ago' : '';
    el('text', { x: 14, y: y + 14, class: 'area-title' }, svg, 'group ' + (t.group || '?') + ' · ' + plural(mem.length, 'member') + reb);
    c.items.push('Consumer group ' + (t.group || '?') + ': ' + plural(mem.length, 'member') + (down.length ? '; ' + down.join(', ') + ' stopped' : '') +
      (since !== null ? '; the assignment last changed ' + since + ' s ago' : '') + '.');
    var parts = t.partitions || [];
    var ownerOfOrder = f && parts[f.partition] ? parts[f.partition].owner : '';
    var pos = function (i) { return { x: 12 + (i % 2) * (mw + 4), y: y + 20 + Math.floor(i / 2) * (mh + 4) }; };
    mem.forEach(function (mb, i) {
      var ps = (mb.partitions || []).map(function (p) { return 'p' + p; }).join(' ') || 'no partitions';
      var g = node('member-' + (i + 1), pos(i).x, pos(i).y, mw, mh, [mb.name + ' (m' + (i + 1) + ')', ps], mb.name + ' (' + mb.client_id + '@' + mb.host + '): ' + ps, 'member owner-' + (i % 6));
      g.setAttribute('data-partitions', (mb.partitions || []).join(','));
      g.setAttribute('data-member', mb.name);
      if (mb.name === ownerOfOrder) { c.cur(g, 'worker'); }
      c.items.push('Member ' + mb.name + ' (' + mb.client_id + ' at ' + mb.host + ') owns ' + ps + '.' + (mb.name === ownerOfOrder ? c.here('worker') : ''));
    });
    down.forEach(function (name, j) {
      var p = pos(mem.length + j);
      node('down-' + name, p.x, p.y, mw, mh, [name, 'stopped'], name + ': stopped', 'down');
    });
    if (c.w.at === 'worker' && !ownerOfOrder) { c.items.push('A worker of the group holds the event.'); }
    return y + gh;
  }

  // drawSinks draws processed_events and the DLQ from y; it returns the
  // diagram's height.
  function drawSinks(c, y) {
    var f = c.f; var t = c.t;
    edge(92, y, 92, y + 20);
    edge(270, y, 270, y + 20, 'dead-lettered ' + num(c.rate.dead_lettered_per_second, '/s'), 'dlq');
    y += 20;
    var il = f ? 'inbox rows ' + f.inbox_rows : 'consumer, event_id';
    c.cur(node('inbox', 8, y, 168, 40, ['processed_events', il], 'processed_events: ' + il), 'inbox');
    c.items.push('processed_events (the inbox): ' + il + '.' + c.here('inbox'));
    var d = t.dlq || {};
    var letters = f && f.dead_letters ? f.dead_letters.length : 0;
    var dl = letters ? letters + ' of this event' : 'oldest ' + num(d.oldest_age_seconds, ' s');
    var depth = plural(d.depth || 0, 'record');
    c.cur(node('dlq', 184, y, 168, 40, ['DLQ · ' + depth, dl], 'dead-letter topic ' + (t.dlq_topic || '') + ': ' + depth + ', ' + dl, letters ? 'hot' : ''), 'dlq');
    c.items.push('Dead-letter topic ' + (t.dlq_topic || '') + ': ' + depth + ', ' + dl + '.' + c.here('dlq'));
    return y + 48;
  }

  // changedNodes are the nodes whose values differ from the step before:
  // the rows, records, offsets and dead letters the step changed.
  function changedNodes(f, prev) {
    if (!f || !prev) { return []; }
    var n = function (a) { return (a || []).length; };
    var out = [];
    if (f.status !== prev.status || f.event_id !== prev.event_id) { out.push('tables'); }
    if (n(f.records) !== n(prev.records) || f.committed_offset !== prev.committed_offset) { out.push('p' + f.partition); }
    if (f.inbox_rows !== prev.inbox_rows) { out.push('inbox'); }
    if (n(f.dead_letters) !== n(prev.dead_letters)) { out.push('dlq'); }
    return out;
  }
  function markChanged(ids, items) {
    var names = [];
    ids.forEach(function (id) {
      var g = svg.querySelector('[data-node="' + id + '"]');
      if (!g) { return; }
      var r = g.querySelector('rect');
      g.setAttribute('data-changed', 'true');
      g.setAttribute('aria-label', g.getAttribute('aria-label') + ', changed at this step');
      el('circle', { cx: Number(r.getAttribute('x')) + Number(r.getAttribute('width')) - 7, cy: Number(r.getAttribute('y')) + 7, r: 4, class: 'changed' }, g);
      names.push(g.querySelector('text').textContent.trim());
    });
    if (names.length) { items.unshift('Changed at this step (marked with a dot): ' + names.join(', ') + '.'); }
  }

  window.eventforgeDiagram = {
    init: function (root, text, partitionHandler) { svg = root; textList = text; onPartition = partitionHandler; draw(); },
    topology: function (t) { topo = t; draw(); },
    mark: function (m) { var moved = !mark || !m || mark.node !== m.node || mark.step !== m.step; mark = m; draw(moved && m); },
    processes: function (p) { procs = p; draw(); },
  };
}());

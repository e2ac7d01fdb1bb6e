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
    var t = topo || { partitions: [], members: [], relays: [], slot: {}, dlq: {}, rates: {} };
    var w = where(); var f = w.facts; var items = [];
    var defs = el('defs', {}, svg);
    var m = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto' }, defs);
    el('path', { d: 'M0 0L10 5L0 10z' }, m);
    var cur = function (g, id) { if (w.at === id) { g.setAttribute('aria-current', 'location'); } };

    // The API and PostgreSQL's tables and slot.
    cur(node('api', 8, 20, 80, 44, ['API', 'POST /orders'], 'API'), 'api');
    items.push('API: receives the order (POST /orders).' + (w.at === 'api' ? ' The event is here.' : ''));
    el('rect', { x: 94, y: 2, width: 258, height: 86, rx: 6, class: 'area' }, svg);
    el('text', { x: 100, y: 14, class: 'area-title' }, svg, 'PostgreSQL');
    var ol = f ? 'order ' + (f.status || 'none') : 'one transaction';
    var el2 = f ? 'event ' + (f.event_id ? f.event_id.slice(0, 8) + '…' : 'none') : '';
    var tl = f ? ol + ', ' + el2 : ol;
    cur(node('tables', 100, 20, 140, 62, ['orders + outbox', ol, el2], 'orders and outbox tables: ' + tl), 'tables');
    items.push('PostgreSQL orders and outbox, written in one transaction: ' + tl + '.' + (w.at === 'tables' ? ' The event is here.' : ''));
    var s = t.slot || {};
    var sl = ['slot', 'conf ' + (s.confirmed_lsn || '?'), 'lag ' + bytes(s.lag_bytes), 'WAL ' + bytes(s.retained_bytes)];
    cur(node('slot', 246, 20, 100, 62, sl, 'slot ' + (s.name || '') + ': confirmed ' + (s.confirmed_lsn || 'unknown') + ', lag ' + bytes(s.lag_bytes) + ', retained WAL ' + bytes(s.retained_bytes)), 'slot');
    items.push('Slot ' + (s.name || '') + (s.active ? ' (streaming)' : ' (inactive)') + ': confirmed position ' + (s.confirmed_lsn || 'unknown') + ', lag ' + bytes(s.lag_bytes) + ', retained WAL ' + bytes(s.retained_bytes) + '.' + (w.at === 'slot' ? ' The event is here.' : ''));
    edge(88, 42, 100, 42);

    // The relays.
    var relays = (t.relays && t.relays.length) ? t.relays : [{ name: 'relay', state: 'unknown' }];
    var rw = Math.min(168, (W - 16 - (relays.length - 1) * 8) / relays.length);
    relays.forEach(function (r, i) {
      var state = relayState(r);
      var g = node(i ? 'relay-' + i : 'relay', 8 + i * (rw + 8), 108, rw, 40, [r.name, state], r.name + ': ' + state, state === 'stopped' ? 'down' : state);
      if (i === 0) { cur(g, 'relay'); }
      items.push('Relay ' + r.name + ': ' + state + '.' + (i === 0 && w.at === 'relay' ? ' The event is here.' : ''));
    });
    edge(300, 82, 176, 108);
    var rate = t.rates || {};
    edge(92, 148, 92, 184, 'published ' + num(rate.published_per_second, '/s'), 'published');
    items.push('Relay to Kafka: ' + num(rate.published_per_second, ' events/s') + '.');

    // The key -> murmur2 -> partition step.
    var y = 168;
    if (f && f.partitions) {
      var step = 'key ' + f.order_id + ' → murmur2 → p' + f.partition;
      el('text', { x: 176, y: y, class: 'murmur', 'data-step': 'murmur2' }, svg, 'murmur2(key) → p' + f.partition);
      items.push('The relay hashes the key with murmur2: ' + step + ' (of ' + f.partitions + ' partitions).');
    }

    // The topic and its partitions.
    y = 186;
    var parts = t.partitions || [];
    var cols = Math.min(Math.max(parts.length, 1), 6);
    var rows = Math.ceil(parts.length / cols) || 1;
    var pw = (W - 24 - (cols - 1) * 4) / cols; var ph = 44;
    var th = 20 + rows * (ph + 4);
    el('rect', { x: 8, y: y, width: W - 16, height: th, rx: 6, class: 'area' }, svg);
    el('text', { x: 14, y: y + 14, class: 'area-title' }, svg, 'topic ' + (t.topic || '?') + ' · ' + plural(parts.length, 'partition'));
    items.push('Topic ' + (t.topic || '?') + ': ' + plural(parts.length, 'partition') + '.');
    var owners = {};
    (t.members || []).forEach(function (mb, i) { owners[mb.name] = i; });
    parts.forEach(function (p, i) {
      var x = 12 + (i % cols) * (pw + 4); var py = y + 20 + Math.floor(i / cols) * (ph + 4);
      var mine = w.partition === p.partition || (w.at === 'partition' && f && f.partition === p.partition);
      var copies = mine && f && f.records ? f.records.length : 0;
      var shown = ['p' + p.partition, 'lag ' + p.lag, p.owner ? 'm' + (owners[p.owner] + 1) : '—'];
      if (copies) { shown[1] += ' @' + f.records[copies - 1].offset; } // the event's record offset
      // The accessible name starts with the visible text (WCAG 2.5.3).
      var label = shown.join(' ') + (copies > 1 ? ' ×' + copies : '') + ': ' + p.high_watermark + ' records, committed ' + p.committed + ', owner ' + (p.owner || 'none') + (copies ? ', ' + plural(copies, 'record') + ' of this event' : '');
      var g = node('p' + p.partition, x, py, pw, ph, shown, label,
        'part owner-' + (p.owner ? owners[p.owner] % 6 : 'none'));
      g.setAttribute('data-partition', p.partition);
      g.setAttribute('data-owner', p.owner || '');
      g.setAttribute('role', 'button');
      g.setAttribute('tabindex', '0');
      if (copies > 1) { el('text', { x: x + pw - 32, y: py + 14, class: 'badge' }, g, '×' + copies); }
      if (w.at === 'partition' && f && f.partition === p.partition) { g.setAttribute('aria-current', 'location'); }
      else if (mine) { g.setAttribute('aria-current', 'true'); }
      g.addEventListener('click', function () { onPartition(p.partition); });
      g.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); onPartition(p.partition); } });
      items.push(label + '.' + (g.hasAttribute('aria-current') ? ' The order\'s partition' + (w.at === 'partition' ? '; the event is here.' : '.') : ''));
    });
    y += th;

    // The consumer group's members.
    edge(92, y, 92, y + 24, 'consumed ' + num(rate.consumed_per_second, '/s'), 'consumed');
    items.push('Kafka to the workers: ' + num(rate.consumed_per_second, ' events/s') + '; rebalances ' + num(t.rebalances) + ', assignment changes seen ' + (t.assignment_changes || 0) + '.');
    y += 24;
    var mem = t.members || [];
    var mw = (W - 24 - 4) / 2; var mh = 40;
    // The demo's stopped workers are drawn greyed out beside the members.
    var down = (procs || []).filter(function (p) { return /^worker-\d/.test(p.name) && !p.running; }).map(function (p) { return p.name; });
    var boxes = mem.length + down.length;
    var gh = 20 + Math.max(1, Math.ceil(boxes / 2)) * (mh + 4);
    el('rect', { x: 8, y: y, width: W - 16, height: gh, rx: 6, class: 'area' }, svg);
    var since = t.assignment_changed_at ? Math.round((Date.parse(t.read_at) - Date.parse(t.assignment_changed_at)) / 1000) : null;
    var reb = since !== null && since < 60 ? ' · rebalanced ' + since + ' s ago' : '';
    el('text', { x: 14, y: y + 14, class: 'area-title' }, svg, 'group ' + (t.group || '?') + ' · ' + plural(mem.length, 'member') + reb);
    items.push('Consumer group ' + (t.group || '?') + ': ' + plural(mem.length, 'member') + (down.length ? '; ' + down.join(', ') + ' stopped' : '') +
      (since !== null ? '; the assignment last changed ' + since + ' s ago' : '') + '.');
    var ownerOfOrder = f && parts[f.partition] ? parts[f.partition].owner : '';
    var at = function (i) { return { x: 12 + (i % 2) * (mw + 4), y: y + 20 + Math.floor(i / 2) * (mh + 4) }; };
    mem.forEach(function (mb, i) {
      var ps = (mb.partitions || []).map(function (p) { return 'p' + p; }).join(' ') || 'no partitions';
      var g = node('member-' + (i + 1), at(i).x, at(i).y, mw, mh, [mb.name + ' (m' + (i + 1) + ')', ps], mb.name + ' (' + mb.client_id + '@' + mb.host + '): ' + ps, 'member owner-' + (i % 6));
      g.setAttribute('data-partitions', (mb.partitions || []).join(','));
      g.setAttribute('data-member', mb.name);
      if (w.at === 'worker' && mb.name === ownerOfOrder) { g.setAttribute('aria-current', 'location'); }
      items.push('Member ' + mb.name + ' (' + mb.client_id + ' at ' + mb.host + ') owns ' + ps + '.' + (g.hasAttribute('aria-current') ? ' The event is here.' : ''));
    });
    down.forEach(function (name, j) {
      var p = at(mem.length + j);
      node('down-' + name, p.x, p.y, mw, mh, [name, 'stopped'], name + ': stopped', 'down');
    });
    if (w.at === 'worker' && !ownerOfOrder) { items.push('A worker of the group holds the event.'); }
    y += gh;

    // processed_events and the DLQ.
    edge(92, y, 92, y + 20);
    edge(270, y, 270, y + 20, 'dead-lettered ' + num(rate.dead_lettered_per_second, '/s'), 'dlq');
    y += 20;
    var il = f ? 'inbox rows ' + f.inbox_rows : 'consumer, event_id';
    cur(node('inbox', 8, y, 168, 40, ['processed_events', il], 'processed_events: ' + il), 'inbox');
    items.push('processed_events (the inbox): ' + il + '.' + (w.at === 'inbox' ? ' The event is here.' : ''));
    var d = t.dlq || {};
    var dl = f && f.dead_letters && f.dead_letters.length ? f.dead_letters.length + ' of this event' : 'oldest ' + num(d.oldest_age_seconds, ' s');
    var dg = node('dlq', 184, y, 168, 40, ['DLQ · ' + plural(d.depth || 0, 'record'), dl], 'dead-letter topic ' + (t.dlq_topic || '') + ': ' + plural(d.depth || 0, 'record') + ', ' + dl, f && f.dead_letters && f.dead_letters.length ? 'hot' : '');
    cur(dg, 'dlq');
    items.push('Dead-letter topic ' + (t.dlq_topic || '') + ': ' + plural(d.depth || 0, 'record') + ', ' + dl + '.' + (w.at === 'dlq' ? ' The event is here.' : ''));
    y += 48;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + y);
    markChanged(changedNodes(f, mark && mark.prev), items);
    var at = svg.querySelector('[aria-current="location"]');
    if (pulse) { pulseUntil = Date.now() + 1600; }
    if (at && Date.now() < pulseUntil) { at.classList.add('pulse'); }
    if (focused) { var again = svg.querySelector('[data-node="' + focused + '"]'); if (again) { again.focus(); } }

    if (textList) {
      textList.textContent = '';
      items.forEach(function (s) { var li = document.createElement('li'); li.textContent = s; textList.appendChild(li); });
    }
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

// EventForge console: steps through a scenario run on the server and shows
// the state the server read at each step. Every timer and request is owned
// by `state` so that pausing, switching scenario or leaving cleans up.
(function () {
  'use strict';
  var app = document.getElementById('app');
  if (!app) { return; }
  var demo = app.dataset.demo === 'true';
  var state = { run: null, view: -1, playing: false, busy: false, timers: new Set(), controllers: new Set(), es: null, scenario: app.dataset.scenario };
  var $ = function (id) { return document.getElementById(id); };
  var PLAY_DELAY = 1500;
  var WATCH_EVERY = 2000;
  var LIVE_EVERY = 1000; // the diagram's live read
  var diagram = window.eventforgeDiagram;
  var live = { timer: null, busy: false, stopped: false, reads: 0 };
  var watched = app.dataset.order; // an operator's order lookup: live cards, no run

  function later(fn, ms) {
    var t = setTimeout(function () { state.timers.delete(t); fn(); }, ms);
    state.timers.add(t);
  }
  function clearTimers() { state.timers.forEach(clearTimeout); state.timers.clear(); }
  function abortAll() { state.controllers.forEach(function (c) { c.abort(); }); state.controllers.clear(); }

  function api(method, path, body) {
    var ctl = new AbortController();
    state.controllers.add(ctl);
    var opts = { method: method, signal: ctl.signal, headers: {} };
    if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
    return fetch(path, opts).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) { var e = new Error(j.error || ('HTTP ' + r.status)); e.run = j.run; throw e; }
        return j;
      });
    }).finally(function () { state.controllers.delete(ctl); });
  }

  function snapshots() { return (state.run && state.run.snapshots) || []; }
  function stepCount() { return document.querySelectorAll('#steps > li').length; }
  function finished() { return state.run && (state.run.status === 'done' || state.run.status === 'failed' || state.run.status === 'stopped'); }

  function setList(el, items) {
    el.textContent = '';
    (items || []).forEach(function (t) { var li = document.createElement('li'); li.textContent = t; el.appendChild(li); });
  }

  function renderCard(name, card) {
    var el = $('card-' + name);
    el.dataset.state = card ? card.state : 'unknown';
    el.querySelector('.label').textContent = card ? card.label : '—';
    setList(el.querySelector('.lines'), card ? card.lines : []);
  }

  // watch re-reads the looked-up order every WATCH_EVERY ms.
  function watch() {
    api('GET', '/api/order?id=' + encodeURIComponent(watched)).then(function (o) {
      ['order', 'outbox', 'effect', 'offset'].forEach(function (k) { renderCard(k, o.cards[k]); });
      diagram.mark({ facts: o.facts });
      $('status').textContent = 'Order ' + watched + ', read at ' + o.facts.read_at.slice(11, 23) + ' UTC';
      later(watch, WATCH_EVERY);
    }).catch(function (e) {
      if (e.name === 'AbortError') { return; }
      $('status').textContent = 'Could not read the order: ' + e.message;
      later(watch, WATCH_EVERY);
    });
  }

  function render() {
    if (watched) { return; }
    var snaps = snapshots();
    var s = state.view >= 0 ? snaps[state.view] : null;
    ['order', 'outbox', 'effect', 'offset'].forEach(function (k) { renderCard(k, s && s.cards[k]); });
    setList($('evidence'), s ? s.evidence : []);
    document.querySelectorAll('#steps > li').forEach(function (li, i) {
      var cur = s && i === s.step - 1;
      li.classList.toggle('current', !!cur);
      if (cur) { li.setAttribute('aria-current', 'step'); } else { li.removeAttribute('aria-current'); }
    });
    var n = stepCount();
    var text;
    if (state.busy) { text = 'Running step ' + (snaps.length + 1) + ' of ' + n + ' on the real pipeline…'; }
    else if (state.run && state.run.status === 'failed') { text = 'The run failed: ' + state.run.error; }
    else if (!s) { text = demo ? 'Not started: press Next step or Play.' : 'Read-only: scenarios need --demo.'; }
    else {
      text = 'Step ' + s.step + ' of ' + n + ': ' + s.title + ' (read at ' + s.at.slice(11, 23) + ' UTC)';
      if (state.view < snaps.length - 1) { text += ' — recorded earlier; Next shows the following recorded step'; }
    }
    $('status').textContent = text;
    $('outcome').hidden = !(state.run && state.run.status === 'done' && state.view === snaps.length - 1);
    $('back').disabled = state.view <= 0;
    $('next').disabled = !demo || state.busy || (state.run && state.run.status === 'done' && state.view >= snaps.length - 1);
    $('play').disabled = !demo || state.playing;
    $('pause').disabled = !state.playing;
    $('replay').disabled = !demo;
    var prev = state.view > 0 ? snaps[state.view - 1] : null;
    diagram.mark(s ? { node: s.node, step: s.step, facts: s.facts, prev: prev && prev.facts } : null);
  }

  // pollTopology reads the architecture every LIVE_EVERY ms while the page
  // is visible and draws it; its timer is its own (pausing a run does not
  // stop the live view, leaving the page does).
  function pollTopology() {
    live.timer = null;
    if (live.stopped) { return; }
    if (document.hidden) { live.timer = setTimeout(pollTopology, LIVE_EVERY); return; }
    live.busy = true;
    api('GET', '/api/topology').then(function (t) {
      live.reads++;
      diagram.topology(t);
      var r = t.rates || {};
      $('live').textContent = 'Live, read at ' + t.read_at.slice(11, 19) + ' UTC: published ' + fmt(r.published_per_second, '/s') +
        ', consumed ' + fmt(r.consumed_per_second, '/s') + ', ' + t.partitions.length + ' partitions, ' + t.members.length + ' group members' +
        (t.errors && t.errors.length ? '. Could not read: ' + t.errors.join('; ') : '.');
    }).catch(function (e) {
      if (e.name !== 'AbortError') { $('live').textContent = 'Live view: could not read the system (' + e.message + ').'; }
    }).finally(function () {
      live.busy = false;
      if (!live.stopped) { live.timer = setTimeout(pollTopology, LIVE_EVERY); }
    });
  }

  // openPartition shows a partition's last records.
  function openPartition(p) {
    api('GET', '/api/partition?p=' + p).then(function (j) {
      var body = $('partition-records');
      body.textContent = '';
      (j.records || []).forEach(function (rec) {
        var tr = document.createElement('tr');
        [String(rec.offset), rec.key, rec.event_id || '—'].forEach(function (v) { var td = document.createElement('td'); td.textContent = v; tr.appendChild(td); });
        body.appendChild(tr);
      });
      $('partition-h').textContent = 'Last ' + (j.records || []).length + ' records of p' + p + ' (' + j.topic + ', newest first)';
      $('partition-panel').hidden = false;
      $('partition-h').focus();
    }).catch(function (e) {
      if (e.name === 'AbortError') { return; }
      $('partition-h').textContent = 'Could not read partition ' + p + ': ' + e.message;
      $('partition-panel').hidden = false;
    });
  }

  function acceptRun(run) {
    if (!run || !run.id) { return; }
    var sameRun = state.run && state.run.id === run.id;
    var atEnd = !state.run || state.view === snapshots().length - 1;
    state.run = run;
    if (!sameRun || atEnd) { state.view = snapshots().length - 1; }
    render();
  }

  function start() {
    abortAll();
    return api('POST', '/api/run', { scenario: state.scenario }).then(function (run) { state.run = run; state.view = -1; render(); });
  }

  function next() {
    if (state.busy) { return Promise.resolve(); }
    var snaps = snapshots();
    if (state.run && state.view < snaps.length - 1) { state.view++; render(); return Promise.resolve(); }
    if (!demo) { return Promise.resolve(); }
    state.busy = true; render();
    var ready = (!state.run || state.run.scenario !== state.scenario || finished()) ? start() : Promise.resolve();
    return ready.then(function () { return api('POST', '/api/run/next'); })
      .then(function (snap) {
        state.busy = false;
        var list = snapshots();
        if (!list.some(function (x) { return x.step === snap.step; })) { list.push(snap); }
        state.run.snapshots = list;
        if (list.length === stepCount()) { state.run.status = 'done'; }
        state.view = list.length - 1;
        render();
      })
      .catch(function (e) {
        state.busy = false;
        if (e.name === 'AbortError') { return; }
        if (e.run) { state.run = e.run; }
        pause();
        render();
        $('status').textContent = 'Step failed: ' + e.message;
      });
  }

  function back() { if (state.view > 0) { state.view--; render(); } }

  function loop() {
    if (!state.playing) { return; }
    next().then(function () {
      if (!state.playing) { return; }
      if (state.run && state.run.status === 'done' && state.view === snapshots().length - 1) { pause(); return; }
      if (state.run && state.run.status === 'failed') { pause(); return; }
      later(loop, PLAY_DELAY);
    });
  }
  function play() { if (state.playing) { return; } state.playing = true; render(); loop(); }
  function pause() { state.playing = false; clearTimers(); render(); }

  function replay() {
    pause();
    state.busy = true; render();
    start().then(function () { state.busy = false; play(); }).catch(function (e) {
      state.busy = false; render();
      if (e.name !== 'AbortError') { $('status').textContent = 'Could not restart: ' + e.message; }
    });
  }

  function switchScenario(name) {
    pause();
    abortAll();
    state.scenario = name;
    var url = new URL(window.location.href);
    url.searchParams.set('scenario', name);
    window.location.assign(url.toString()); // the server renders the scenario's steps
  }

  function fmt(v, unit) { return v === null || v === undefined ? 'unknown' : (Math.round(v * 10) / 10) + (unit || ''); }
  function renderSignals(s) {
    $('sig-slot-lag').textContent = s.slot_lag_bytes === null ? 'unknown' : s.slot_lag_bytes + ' bytes (confirmed ' + (s.confirmed_lsn || '?') + (s.slot_active ? ', streaming' : ', inactive') + ')';
    $('sig-unconfirmed').textContent = fmt(s.oldest_unconfirmed_age_seconds, ' s');
    $('sig-publish-errors').textContent = fmt(s.publish_errors);
    $('sig-consumer-lag').textContent = fmt(s.consumer_lag, ' messages');
    $('sig-duplicates').textContent = fmt(s.duplicates_dropped);
    $('sig-retries').textContent = fmt(s.retries);
    $('sig-dlq-age').textContent = fmt(s.dlq_oldest_age_seconds, ' s');
  }
  function renderProcesses(list) {
    var el = $('processes');
    if (!el) { return; }
    setList(el, (list || []).map(function (p) {
      return p.name + ': ' + (p.running ? 'running, pid ' + p.pid : 'stopped') + (p.failpoint ? ', failpoint ' + p.failpoint : '') + ', starts ' + p.starts;
    }));
  }

  function connect() {
    if (!window.EventSource) { return; }
    var es = new EventSource('/events');
    state.es = es;
    es.addEventListener('run', function (e) {
      if (watched) { return; }
      var run = JSON.parse(e.data);
      if (run.scenario === state.scenario && !state.busy) { acceptRun(run); }
    });
    es.addEventListener('signals', function (e) { renderSignals(JSON.parse(e.data)); });
    es.addEventListener('processes', function (e) { var p = JSON.parse(e.data); renderProcesses(p); diagram.processes(p); });
  }

  function leave() {
    state.playing = false;
    clearTimers();
    abortAll();
    if (state.es) { state.es.close(); state.es = null; }
    live.stopped = true;
    if (live.timer) { clearTimeout(live.timer); live.timer = null; }
    if (demo && navigator.sendBeacon) { navigator.sendBeacon('/api/run/stop'); }
  }

  $('next').addEventListener('click', function () { next(); });
  $('back').addEventListener('click', back);
  $('play').addEventListener('click', play);
  $('pause').addEventListener('click', pause);
  $('replay').addEventListener('click', replay);
  $('scenario').addEventListener('change', function (e) { switchScenario(e.target.value); });
  $('show').hidden = true; // the select switches at once with scripts on
  $('controls').hidden = false; // the step controls need scripts; without them, "Read all steps" serves
  document.addEventListener('keydown', function (e) {
    var tag = e.target && e.target.tagName;
    if (tag === 'SELECT' || tag === 'INPUT' || tag === 'TEXTAREA' || e.altKey || e.ctrlKey || e.metaKey) { return; }
    if (e.key === 'ArrowRight') { e.preventDefault(); next(); }
    if (e.key === 'ArrowLeft') { e.preventDefault(); back(); }
  });
  window.addEventListener('pagehide', leave);

  // For the browser tests: what is still scheduled or in flight.
  window.eventforgeConsole = {
    debug: function () {
      return { timers: state.timers.size, inflight: state.controllers.size, playing: state.playing, busy: state.busy,
        eventSource: state.es ? state.es.readyState : -1, view: state.view, snapshots: snapshots().length,
        status: state.run ? state.run.status : 'none', liveReads: live.reads, livePolling: !!(live.timer || live.busy) };
    },
    leave: leave
  };

  diagram.init($('diagram'), $('diagram-text'), openPartition);
  connect();
  render();
  pollTopology();
  if (watched) {
    ['back', 'next', 'play', 'pause', 'replay'].forEach(function (b) { $(b).disabled = true; });
    watch();
  }
}());

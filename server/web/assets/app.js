// Sluice's page: a chat over /v1/chat/completions and a live view of the
// engine over /v1/engine/events. Plain modules, no build step. The chat, the
// settings and the theme stay in this browser (localStorage); the API key
// does not (below).

import { render, Live } from './md.js';

const $ = (id) => document.getElementById(id);
const store = {
  get(k, d) {
    try { const v = localStorage.getItem('sluice.' + k); return v === null ? d : JSON.parse(v); } catch { return d; }
  },
  set(k, v) { try { localStorage.setItem('sluice.' + k, JSON.stringify(v)); } catch { /* full or disabled: the page still works */ } },
};

// ---- API key: asked when the server first answers 401 ----
// The key lives in this tab's memory. It is never written to localStorage,
// where it would outlive the browser session and sit on disk for anything
// later served from this origin to read; older versions of the page put it
// there, so it is deleted at load. A tab asks the page's other open tabs for
// it (BroadcastChannel, same origin only) before it asks the user, so the
// engine view in a second tab does not ask again; and the user may tick
// "Remember in this tab" to keep it across reloads of this one tab
// (sessionStorage: gone when the tab closes).

try { localStorage.removeItem('sluice.key'); } catch { /* storage disabled: nothing kept there */ }
const session = {
  get() { try { return sessionStorage.getItem('sluice.key') || ''; } catch { return ''; } },
  set(k) { try { if (k) sessionStorage.setItem('sluice.key', k); else sessionStorage.removeItem('sluice.key'); } catch { /* disabled: memory only */ } },
};
let apiKey = session.get();
let keyPrompt = null;
const peers = typeof BroadcastChannel === 'function' ? new BroadcastChannel('sluice.key') : null;
peers?.addEventListener('message', (e) => {
  if (e.data === 'ask' && apiKey) peers.postMessage({ key: apiKey });
});

function authHeaders(h = {}) {
  if (apiKey) h.Authorization = 'Bearer ' + apiKey;
  return h;
}

// keyFromPeers resolves to the key another open tab of this page holds, or
// '' when none answers within ms.
function keyFromPeers(ms = 300) {
  if (!peers) return Promise.resolve('');
  return new Promise((resolve) => {
    const done = (k) => {
      peers.removeEventListener('message', onMsg);
      clearTimeout(timer);
      resolve(k);
    };
    const onMsg = (e) => { if (e.data && typeof e.data.key === 'string') done(e.data.key); };
    const timer = setTimeout(() => done(''), ms);
    peers.addEventListener('message', onMsg);
    peers.postMessage('ask');
  });
}

// askKey resolves true when there is a new key to try: one from another tab
// (unless it is the one just refused), else one the user entered. However
// many requests are waiting, it asks once.
function askKey({ dialogOnly = false } = {}) {
  if (keyPrompt) return keyPrompt;
  keyPrompt = (async () => {
    const k = dialogOnly ? '' : await keyFromPeers();
    if (k && k !== apiKey) {
      apiKey = k;
      return true;
    }
    return keyDialog();
  })().finally(() => { keyPrompt = null; });
  return keyPrompt;
}

function keyDialog() {
  const d = $('key-dialog');
  $('key-input').value = apiKey;
  $('key-remember').checked = session.get() !== '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => {
      if (d.returnValue === 'save' && $('key-input').value.trim()) {
        apiKey = $('key-input').value.trim();
        session.set($('key-remember').checked ? apiKey : '');
        resolve(true);
      } else resolve(false);
    }, { once: true });
    d.showModal();
  });
}

// api fetches with the key, asking for one on 401 and retrying. A request
// that went out before a new key came (from the user or another tab) just
// retries with it.
async function api(path, init = {}) {
  for (;;) {
    const sent = apiKey;
    const res = await fetch(path, { ...init, headers: authHeaders({ ...(init.headers || {}) }) });
    if (res.status !== 401) return res;
    if (apiKey !== sent) continue;
    if (!(await askKey())) return res;
  }
}

// ---- SSE over a fetch body: EventSource cannot POST or send headers ----

// readEvents calls onEvent({id, data}) per event and resolves at the end of
// the body; it rejects when the connection drops (or is aborted).
async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    for (let i; (i = buf.search(/\r?\n\r?\n/)) >= 0; ) {
      const raw = buf.slice(0, i);
      buf = buf.slice(i + (buf[i] === '\r' ? 4 : 2));
      let id = null;
      const data = [];
      for (const line of raw.split(/\r?\n/)) {
        if (line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const val = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'id') id = val;
        else if (field === 'data') data.push(val);
      }
      if (data.length) onEvent({ id, data: data.join('\n') });
    }
  }
}

// ---- Chat ----

const chat = {
  messages: store.get('messages', []),
  current: null, // {ctl, reason} of the request in flight
  stopped: false, // Stop was pressed during this reply
};

function settings() {
  const num = (id) => { const v = parseFloat($(id).value); return Number.isFinite(v) ? v : undefined; };
  return { system: $('system').value, temperature: num('temperature'), top_p: num('top_p'), max_tokens: num('max_tokens') };
}

function saveSettings() { store.set('settings', settings()); }

function loadSettings() {
  const s = store.get('settings', null);
  if (!s) return;
  $('system').value = s.system ?? '';
  for (const k of ['temperature', 'top_p', 'max_tokens']) if (s[k] !== undefined) $(k).value = s[k];
}

function saveMessages() { store.set('messages', chat.messages); }

function metaText(m) {
  const x = m.meta || {};
  const parts = [];
  if (x.ttft !== undefined) parts.push(`TTFT ${Math.round(x.ttft)} ms`);
  if (x.tps !== undefined) parts.push(`${x.tps.toFixed(1)} tok/s`);
  if (x.tokens) parts.push(`${x.tokens} tokens`);
  if (x.finish) parts.push(x.finish);
  return parts.join(' · ');
}

// messageNode builds (or refreshes) the DOM of one message; a reply being
// streamed keeps its body in live, which renders only what can still change.
function messageNode(m, node, live) {
  node ||= Object.assign(document.createElement('article'), { className: 'msg ' + m.role });
  let body;
  if (live) {
    body = live.el;
    live.update(m.content);
  } else {
    body = document.createElement('div');
    body.className = 'body';
    if (m.role === 'assistant') body.append(render(m.content));
    else body.textContent = m.content;
  }
  const meta = document.createElement('div');
  meta.className = 'meta';
  meta.textContent = metaText(m);
  const notes = document.createElement('div');
  notes.className = 'notes';
  for (const n of (m.meta && m.meta.notes) || []) {
    const s = document.createElement('span');
    s.className = 'note ' + (n.kind || '');
    s.textContent = n.text;
    notes.append(s);
  }
  node.replaceChildren(body, notes, meta);
  return node;
}

// throttle returns f(), which runs fn at once unless it ran less than a
// frame ago, or less than its own last run took: then once, when that much
// time has passed. So a reply's text shows token by token while tokens come
// slower than frames, a burst of chunks (a resume's replay, a fast model)
// is rendered once, and rendering never takes more than half the page's
// time however long the reply. f.now() runs it at once.
function throttle(fn, frame = 16) {
  let end = -Infinity, took = 0, timer = 0;
  const now = () => {
    clearTimeout(timer);
    timer = 0;
    const t0 = performance.now();
    fn();
    end = performance.now();
    took = end - t0;
  };
  const f = () => {
    if (timer) return;
    const wait = end + Math.max(frame, took) - performance.now();
    if (wait <= 0) now(); else timer = setTimeout(now, wait);
  };
  f.now = now;
  return f;
}

function renderAll() {
  $('messages').replaceChildren(...chat.messages.map((m) => messageNode(m)));
  scrollDown();
}

function scrollDown() {
  const box = $('messages');
  box.scrollTop = box.scrollHeight;
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
}

function requestBody() {
  const s = settings();
  const msgs = [];
  if (s.system.trim()) msgs.push({ role: 'system', content: s.system });
  for (const m of chat.messages) {
    if (m.role === 'assistant' && m.meta && m.meta.pending) continue;
    if (m.content !== '' || m.role === 'user') msgs.push({ role: m.role, content: m.content });
  }
  const body = { messages: msgs, stream: true, stream_options: { include_usage: true } };
  if (s.temperature !== undefined) body.temperature = s.temperature;
  if (s.top_p !== undefined) body.top_p = s.top_p;
  if (s.max_tokens !== undefined) body.max_tokens = Math.round(s.max_tokens);
  return body;
}

async function errorText(res) {
  try {
    const j = await res.json();
    return (j.error && j.error.message) || res.statusText;
  } catch { return `${res.status} ${res.statusText}`; }
}

const MAX_RESUMES = 5;

async function send(text) {
  chat.messages.push({ role: 'user', content: text });
  const body = requestBody();
  const reply = { role: 'assistant', content: '', meta: { pending: true, notes: [] } };
  chat.messages.push(reply);
  saveMessages();
  renderAll();
  const node = $('messages').lastElementChild;
  const live = new Live(Object.assign(document.createElement('div'), { className: 'body' }));
  const refresh = throttle(() => { messageNode(reply, node, live); scrollDown(); });
  setBusy(true);

  const t0 = performance.now();
  let tFirst = 0, tLast = 0, chunks = 0, usage = null;
  let streamId = null, lastId = '0', done = false;
  const onEvent = (ev) => {
    if (ev.id !== null) lastId = ev.id;
    if (ev.data === '[DONE]') { done = true; return; }
    let j;
    try { j = JSON.parse(ev.data); } catch { return; }
    if (j.error) {
      reply.meta.notes.push({ kind: 'error', text: 'error: ' + (j.error.message || j.error.code) });
      refresh.now();
      return;
    }
    if (j.usage) usage = j.usage;
    const c = j.choices && j.choices[0];
    if (!c) return;
    if (c.finish_reason) reply.meta.finish = c.finish_reason;
    const d = c.delta && c.delta.content;
    if (d) {
      const now = performance.now();
      if (!tFirst) { tFirst = now; reply.meta.ttft = now - t0; }
      tLast = now;
      chunks++;
      reply.content += d;
      reply.meta.tokens = chunks;
      refresh();
    }
  };

  let res;
  let attempt = 0;
  chat.stopped = false;
  for (;;) {
    if (chat.stopped) { // pressed while waiting to resume
      reply.meta.finish = 'stopped';
      break;
    }
    const ctl = new AbortController();
    chat.current = { ctl, reason: null };
    try {
      if (!res) {
        res = streamId
          ? await api(`/v1/streams/${encodeURIComponent(streamId)}`, { headers: { 'Last-Event-ID': lastId }, signal: ctl.signal })
          : await api('/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: ctl.signal });
        if (!res.ok) {
          reply.meta.notes.push({ kind: 'error', text: `error: ${await errorText(res)}` });
          break;
        }
        streamId ||= res.headers.get('X-Sluice-Stream-Id');
      }
      await readEvents(res.body, onEvent);
      if (done) break;
      throw new Error('the stream ended before [DONE]');
    } catch (e) {
      const reason = chat.current.reason;
      if (reason === 'stop') {
        reply.meta.finish = 'stopped';
        break;
      }
      // A dropped connection: the server freed the sequence's blocks when it
      // noticed; resuming replays what was missed and continues generating.
      if (!streamId || attempt >= MAX_RESUMES) {
        reply.meta.notes.push({ kind: 'error', text: `connection lost: ${e.message || e}` });
        break;
      }
      attempt++;
      reply.meta.notes.push({ kind: 'resume', text: `connection lost; resumed after event ${lastId}` });
      refresh.now();
      res = null;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
  chat.current = null;
  if (usage) reply.meta.tokens = usage.completion_tokens;
  const n = reply.meta.tokens || 0;
  if (n > 1 && tLast > tFirst) reply.meta.tps = ((n - 1) * 1000) / (tLast - tFirst);
  delete reply.meta.pending;
  saveMessages();
  refresh.now();
  setBusy(false);
}

function stop() {
  if (!chat.current) return;
  chat.stopped = true;
  chat.current.reason = 'stop';
  chat.current.ctl.abort();
}

// ---- Engine view ----

const eng = {
  latest: null,
  history: [], // {ms, prompt, decode} per frame that followed a step
  recent: [],
  seenEnds: 0,
  drawn: null,
  conn: null,
  frames: 0,
};

function hue(id) { return (Number(id) * 137.508) % 360; }

function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

function fitCanvas(c) {
  const w = c.clientWidth, h = c.clientHeight;
  const r = window.devicePixelRatio || 1;
  if (c.width !== Math.round(w * r) || c.height !== Math.round(h * r)) {
    c.width = Math.round(w * r);
    c.height = Math.round(h * r);
  }
  const g = c.getContext('2d');
  g.setTransform(r, 0, 0, r, 0, 0);
  g.clearRect(0, 0, w, h);
  return [g, w, h];
}

function drawSteps() {
  const [g, w, h] = fitCanvas($('steps-chart'));
  const hist = eng.history;
  if (!hist.length) return;
  const n = 120, bw = w / n;
  const maxRows = Math.max(1, ...hist.map((x) => x.prompt + x.decode));
  const maxMs = Math.max(1, ...hist.map((x) => x.ms));
  const cp = cssVar('--prompt'), cd = cssVar('--decode'), cl = cssVar('--fg');
  hist.forEach((x, i) => {
    const xp = w - (hist.length - i) * bw;
    const hd = (x.decode / maxRows) * (h - 12), hp = (x.prompt / maxRows) * (h - 12);
    g.fillStyle = cd; g.fillRect(xp, h - hd, bw - 1, hd);
    g.fillStyle = cp; g.fillRect(xp, h - hd - hp, bw - 1, hp);
  });
  g.strokeStyle = cl; g.lineWidth = 1.5; g.beginPath();
  hist.forEach((x, i) => {
    const xp = w - (hist.length - i) * bw + bw / 2, y = h - (x.ms / maxMs) * (h - 12);
    if (i) g.lineTo(xp, y); else g.moveTo(xp, y);
  });
  g.stroke();
  g.fillStyle = cl; g.font = '11px sans-serif';
  g.fillText(`max ${maxRows} rows · ${maxMs.toFixed(1)} ms`, 4, 11);
}

function drawPoolMap(st) {
  const c = $('pool-map');
  const total = st.kv.total;
  const w = c.clientWidth;
  const cell = total > 2000 ? 4 : total > 600 ? 6 : 10;
  const cols = Math.max(1, Math.floor(w / cell));
  c.style.height = Math.ceil(total / cols) * cell + 'px';
  const [g] = fitCanvas(c);
  const owner = new Map();
  for (const s of st.seqs) for (const b of s.blocks) owner.set(b, s.id);
  g.fillStyle = cssVar('--free');
  for (let b = 0; b < total; b++) {
    if (!owner.has(b)) g.fillRect((b % cols) * cell, Math.floor(b / cols) * cell, cell - 1, cell - 1);
  }
  for (const [b, id] of owner) {
    g.fillStyle = `hsl(${hue(id)} 65% 50%)`;
    g.fillRect((b % cols) * cell, Math.floor(b / cols) * cell, cell - 1, cell - 1);
  }
}

function seqRow(s, bs) {
  const row = document.createElement('div');
  row.className = 'seq';
  row.dataset.id = s.id;
  const label = document.createElement('span');
  label.className = 'label';
  const dot = document.createElement('i');
  dot.style.background = `hsl(${hue(s.id)} 65% 50%)`;
  label.append(dot, `#${s.id} ${s.running ? 'running' : 'waiting'}`);
  const info = document.createElement('span');
  info.className = 'muted';
  info.textContent = `${s.tokens - s.prompt} out · ${s.prompt} prompt · ${s.cached} cached · ${s.blocks.length} blocks`;
  const strip = document.createElement('div');
  strip.className = 'strip';
  const cachedBlocks = Math.floor(s.cached / bs);
  s.blocks.forEach((b, i) => {
    const cell = document.createElement('i');
    const filled = Math.max(0, Math.min(bs, s.computed - i * bs));
    cell.style.setProperty('--fill', `${(filled / bs) * 100}%`);
    cell.style.setProperty('--c', `hsl(${hue(s.id)} 65% 50%)`);
    if (i < cachedBlocks) cell.className = 'hit';
    cell.title = `block ${b}`;
    strip.append(cell);
  });
  row.append(label, info, strip);
  return row;
}

function endItem(e) {
  const li = document.createElement('li');
  li.className = e.finish === 'abort' ? 'abort' : '';
  const when = new Date(e.at).toLocaleTimeString();
  const what = e.finish === 'abort' ? `aborted (${e.cause})` : `finished (${e.finish})`;
  li.textContent = `${when} · step ${e.step} · #${e.id} ${what}: ${e.blocks} blocks back` +
    (e.finish === 'abort' ? ` in ${e.reclaim_ms.toFixed(2)} ms after the cancel` : '');
  return li;
}

function drawEngine() {
  eng.drawn = eng.latest;
  const st = eng.latest;
  if (!st) return;
  $('engine-steps').textContent = st.steps;
  $('running').textContent = st.running;
  $('waiting').textContent = st.waiting;
  $('step-ms').textContent = st.step.rows ? `${st.step.ms.toFixed(1)} ms` : '–';
  $('step-rows').textContent = st.step.rows;
  $('step-split').textContent = `${st.step.prompt} / ${st.step.decode}`;
  $('kv-used').textContent = st.kv.used;
  $('kv-cached').textContent = st.kv.cached;
  $('kv-free').textContent = st.kv.free;
  $('kv-total').textContent = `${st.kv.total} blocks of ${st.block_size} tokens`;
  const bar = $('pool-bar').children;
  const pct = (x) => `${(100 * x) / Math.max(1, st.kv.total)}%`;
  bar[0].style.width = pct(st.kv.used);
  bar[1].style.width = pct(st.kv.cached);
  bar[2].style.width = pct(st.kv.free);
  const seqs = $('seqs');
  if (st.seqs.length) seqs.replaceChildren(...st.seqs.map((s) => seqRow(s, st.block_size)));
  else seqs.replaceChildren(Object.assign(document.createElement('p'), { className: 'muted', textContent: 'none' }));
  const ends = $('ends');
  for (const e of st.ends) {
    if (e.n <= eng.seenEnds) continue;
    eng.seenEnds = e.n;
    ends.prepend(endItem(e));
    if (e.finish === 'abort') {
      $('pool-bar').classList.remove('flash');
      void $('pool-bar').offsetWidth; // restart the animation
      $('pool-bar').classList.add('flash');
    }
  }
  while (ends.children.length > 50) ends.lastElementChild.remove();
  drawSteps();
  drawPoolMap(st);
}

function onFrame(st) {
  eng.frames++;
  // A short record of what arrived (not only what was drawn), for tests.
  eng.recent.push({ frame: st.frame, steps: st.steps, used: st.kv.used, running: st.running, at: st.at, step_ms: st.step.ms });
  if (eng.recent.length > 256) eng.recent.shift();
  const prev = eng.latest;
  if (st.step.rows && (!prev || st.steps !== prev.steps)) {
    eng.history.push({ ms: st.step.ms, prompt: st.step.prompt, decode: st.step.decode });
    if (eng.history.length > 120) eng.history.shift();
  }
  eng.latest = st;
  // Drawn once per display frame with the newest state, however fast frames come.
  if (eng.drawn === prev) requestAnimationFrame(drawEngine);
}

function setLive(on, text) {
  const p = $('live');
  p.textContent = text;
  p.classList.toggle('on', on);
}

// watchEngine keeps the status stream open while the engine view is shown.
async function watchEngine() {
  if (eng.conn) return;
  const ctl = new AbortController();
  eng.conn = ctl;
  while (eng.conn === ctl) {
    try {
      const res = await api('/v1/engine/events', { signal: ctl.signal });
      if (!res.ok) throw new Error(await errorText(res));
      setLive(true, 'live');
      await readEvents(res.body, (ev) => { try { onFrame(JSON.parse(ev.data)); } catch { /* a frame the page cannot read */ } });
    } catch (e) {
      if (eng.conn !== ctl) return;
      setLive(false, 'reconnecting');
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function unwatchEngine() {
  if (eng.conn) eng.conn.abort();
  eng.conn = null;
  setLive(false, 'paused');
}

// ---- Layout, theme, wiring ----

const wide = window.matchMedia('(min-width: 1100px)');

function show(view) {
  document.body.dataset.view = view;
  for (const b of document.querySelectorAll('.tabs button')) b.setAttribute('aria-pressed', String(b.dataset.view === view));
  const only = document.body.dataset.only;
  const engineVisible = only === 'engine' || (only !== 'chat' && (wide.matches || view === 'engine'));
  if (engineVisible) watchEngine(); else unwatchEngine();
}

const THEMES = ['auto', 'light', 'dark'];
function applyTheme(t) {
  if (t === 'auto') delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = t;
  $('theme').textContent = 'Theme: ' + t;
  if (eng.latest) requestAnimationFrame(drawEngine);
}

async function loadModel() {
  try {
    const res = await api('/v1/models');
    if (res.ok) {
      const j = await res.json();
      $('model').textContent = j.data && j.data[0] ? j.data[0].id : '';
    }
  } catch { /* offline: the chat reports it when used */ }
}

function init() {
  const params = new URLSearchParams(location.search);
  const only = params.get('view'); // "chat" or "engine": that view alone
  if (only === 'chat' || only === 'engine') document.body.dataset.only = only;
  loadSettings();
  renderAll();
  let theme = store.get('theme', 'auto');
  applyTheme(theme);
  $('theme').addEventListener('click', () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    store.set('theme', theme);
    applyTheme(theme);
  });
  $('key-btn').addEventListener('click', async () => { if (await askKey({ dialogOnly: true })) loadModel(); });
  for (const b of document.querySelectorAll('.tabs button')) b.addEventListener('click', () => show(b.dataset.view));
  wide.addEventListener('change', () => show(document.body.dataset.view));
  for (const id of ['system', 'temperature', 'top_p', 'max_tokens']) $(id).addEventListener('change', saveSettings);
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('input').value;
    if (!text.trim() || chat.current) return;
    $('input').value = '';
    send(text);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', stop);
  $('clear').addEventListener('click', () => {
    if (chat.current) stop();
    chat.messages = [];
    saveMessages();
    renderAll();
  });
  window.addEventListener('resize', () => { if (eng.latest) requestAnimationFrame(drawEngine); });
  show(only === 'engine' ? 'engine' : 'chat');
  loadModel();
}

// For tests and the curious: the engine view's state, and a way to cut the
// chat's connection as a network failure would (the page then resumes).
window.sluice = {
  engine: eng,
  chat,
  dropConnection() {
    if (!chat.current) return false;
    chat.current.reason = 'drop';
    chat.current.ctl.abort();
    return true;
  },
};

init();

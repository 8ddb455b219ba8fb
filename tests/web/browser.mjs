// Drives Sluice's page in headless Chromium against a running server and
// prints one JSON line: {"ok", "failures", "figures"}. Environment:
//   SLUICE_URL   the server (started with --api-key $SLUICE_KEY)
//   SLUICE_KEY   the API key the page is given when it asks
//   CHROMIUM     the browser to run (tests/web/fetch-chromium.sh prints it)
//   SCREENSHOTS  a folder for the README's screenshots (optional)
import { chromium } from 'playwright-core';
import path from 'node:path';

const base = process.env.SLUICE_URL;
const key = process.env.SLUICE_KEY;
const shots = process.env.SCREENSHOTS || '';
const failures = [];
const figures = {};
const check = (cond, msg) => { if (!cond) failures.push(msg); return cond; };
const auth = { Authorization: `Bearer ${key}` };

async function metric(name, label) {
  const text = await (await fetch(`${base}/metrics`, { headers: auth })).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(name + (label ? `{` : ' ')) && (!label || line.includes(label))) return Number(line.split(' ').pop());
  }
  return NaN;
}

// complete runs a chat request outside the browser and returns its text.
async function complete(messages, max_tokens) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens, temperature: 0, top_p: 1 }),
  });
  return (await res.json()).choices[0].message.content;
}

async function setSettings(page, { temperature = 0, top_p = 1, max_tokens = 128, system = '' }) {
  await page.evaluate(() => { document.getElementById('settings').open = true; });
  await page.fill('#system', system);
  await page.fill('#temperature', String(temperature));
  await page.fill('#top_p', String(top_p));
  await page.fill('#max_tokens', String(max_tokens));
  await page.click('#clear');
  await page.evaluate(() => { document.getElementById('settings').open = false; });
}

async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

const lastReply = (page) => page.locator('.msg.assistant').last();

async function waitDone(page, timeout = 60000) {
  await page.waitForFunction(() => !window.sluice.chat.current && document.querySelector('.msg.assistant:last-child .meta')?.textContent, null, { timeout });
}

// 1. Tokens arrive incrementally: the reply's text changes many times,
// spread over the generation rather than in one burst. TTFT and tokens/s
// are shown. A screenshot of the page mid-reply.
async function streams(page) {
  await setSettings(page, { max_tokens: 240 });
  await page.evaluate(() => {
    window.__updates = [];
    new MutationObserver(() => {
      const b = document.querySelector('.msg.assistant:last-child .body');
      const n = b ? b.textContent.length : 0;
      const u = window.__updates;
      if (n > 0 && (!u.length || u[u.length - 1].n !== n)) u.push({ t: performance.now(), n });
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  const t0 = await page.evaluate(() => performance.now());
  await send(page, 'Write a short story about a lighthouse keeper and a storm.');
  await page.waitForFunction(() => window.__updates.length >= 80, null, { timeout: 30000 });
  if (shots) await page.screenshot({ path: path.join(shots, 'chat-mid-reply.png') });
  await waitDone(page);
  const u = await page.evaluate(() => window.__updates);
  const tEnd = await page.evaluate(() => performance.now());
  const span = u[u.length - 1].t - u[0].t;
  const mid = u[Math.floor(u.length / 2)].t - u[0].t;
  figures.stream = { updates: u.length, first_update_ms: Math.round(u[0].t - t0), span_ms: Math.round(span), median_at: +(mid / span).toFixed(2) };
  check(u.length >= 40, `only ${u.length} DOM updates of the reply`);
  check(span >= 500, `updates spanned ${span} ms`);
  check(mid / span > 0.25 && mid / span < 0.75, `half the updates came by ${(mid / span).toFixed(2)} of the span: a burst`);
  const meta = await lastReply(page).locator('.meta').textContent();
  figures.stream.meta = meta;
  check(/TTFT \d+ ms/.test(meta) && /[\d.]+ tok\/s/.test(meta), `reply meta "${meta}" lacks TTFT or tok/s`);
  void tEnd;
}

// 2. Stop aborts the request on the server: the client_disconnect abort
// counter rises by one and the reply says it was stopped.
async function stops(page) {
  await setSettings(page, { max_tokens: 1500 });
  const before = await metric('sluice_requests_aborted_total', 'cause="client_disconnect"');
  await send(page, 'Tell me a very long story about a dragon who learns to paint.');
  await page.waitForFunction(() => (document.querySelector('.msg.assistant:last-child .body')?.textContent.length || 0) > 30, null, { timeout: 30000 });
  await page.click('#stop');
  await waitDone(page);
  const meta = await lastReply(page).locator('.meta').textContent();
  check(meta.includes('stopped'), `after Stop the reply says "${meta}"`);
  let after = before;
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 50));
    after = await metric('sluice_requests_aborted_total', 'cause="client_disconnect"');
  }
  figures.stop = { aborted_before: before, aborted_after: after };
  check(after === before + 1, `sluice_requests_aborted_total{cause="client_disconnect"} went ${before} → ${after}`);
}

// 3. A dropped connection resumes with Last-Event-ID: the page notes it and
// the text equals an uninterrupted greedy run.
async function resumes(page) {
  const prompt = 'List five facts about the Moon.';
  const want = await complete([{ role: 'user', content: prompt }], 120);
  await setSettings(page, { max_tokens: 120 });
  // On a loaded machine the browser can paint a reply only once it has all
  // arrived, leaving nothing to drop: the drop is what is tested, so such a
  // reply is asked again (at most three times), never counted as a resume.
  let dropped = false;
  for (let attempt = 0; attempt < 3 && !dropped; attempt++) {
    await send(page, prompt);
    await page.waitForFunction(() => (document.querySelector('.msg.assistant:last-child .body')?.textContent.length || 0) > 0, null, { timeout: 30000 });
    dropped = await page.evaluate(() => window.sluice.dropConnection());
    await waitDone(page);
  }
  check(dropped, 'no request to drop in three replies');
  const notes = await lastReply(page).locator('.note.resume').allTextContents();
  const got = await page.evaluate(() => window.sluice.chat.messages.at(-1).content);
  figures.resume = { notes, equal: got === want, chars: got.length };
  check(notes.length === 1 && /resumed after event \d+/.test(notes[0]), `resume notes ${JSON.stringify(notes)}`);
  check(got === want, `resumed text differs from the uninterrupted run:\n${JSON.stringify(got)}\n${JSON.stringify(want)}`);
}

// 4. Model output with <script> is shown as text: the model's own (it puts
// it in a code block), and raw HTML streamed outside any code block.
async function escapes(page) {
  await setSettings(page, { max_tokens: 80 });
  await send(page, 'Write an HTML line that sets window.pwned = 1 inside a script tag. Answer with the raw HTML only, no Markdown.');
  await waitDone(page);
  const real = await lastReply(page).locator('.body').textContent();
  check(real.includes('<script'), `the model's reply has no <script> to test with: ${JSON.stringify(real)}`);
  // The same page fed a stream whose text is raw HTML, as a model could write it.
  const evil = ['<img src=x onerror="window.pwned=2">', '<script>window.pwned=3</script>', ' **bold** <b>not bold</b>'];
  await page.route('**/v1/chat/completions', (route) => {
    const ev = (id, d) => `id: ${id}\ndata: ${JSON.stringify({ choices: [{ index: 0, delta: d, finish_reason: null }] })}\n\n`;
    let body = ev(1, { role: 'assistant', content: '' });
    evil.forEach((t, i) => { body += ev(i + 2, { content: t }); });
    body += 'id: 9\ndata: [DONE]\n\n';
    route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream', 'X-Sluice-Stream-Id': 'x' }, body });
  });
  await send(page, 'anything');
  await waitDone(page);
  await page.unroute('**/v1/chat/completions');
  const r = await page.evaluate(() => {
    const b = document.querySelector('.msg.assistant:last-child .body');
    return { text: b.textContent, scripts: document.querySelectorAll('#messages script, #messages img, #messages b').length, strong: b.querySelectorAll('strong').length, pwned: window.pwned };
  });
  figures.escape = { model: real.slice(0, 80), ...r };
  check(r.text.includes('<script>window.pwned=3</script>') && r.text.includes('<img src=x'), `raw HTML not shown as text: ${r.text}`);
  check(r.scripts === 0 && r.pwned === undefined, `model output became elements (${r.scripts}) or ran (pwned=${r.pwned})`);
  check(r.strong === 1, 'Markdown bold not rendered');
}

// 5. The Markdown renderer is linear in its input: hostile lines of 100k
// characters render within a budget (a line of 2,400 backticks took about a
// second before, and was rendered again on every chunk); a reply streamed as
// 1,000 chunks of such a line completes within a budget; and the streamed
// rendering (Live: blocks that cannot change rendered once) gives the nodes
// rendering the whole text does.
async function markdown(page) {
  const r = await page.evaluate(async () => {
    const { render, Live } = await import('/ui/md.js');
    const n = 100000;
    // 'x ' first: a line that starts with backticks opens a code fence.
    const lines = {
      backticks: 'x ' + '`'.repeat(n), 'backtick pairs': 'x `a'.repeat(n / 4), brackets: '['.repeat(n),
      'star pairs': '**a'.repeat(n / 3), 'a fence of backticks': '`'.repeat(n) + '\ncode\n'.repeat(1000),
    };
    const ms = {};
    for (const [name, text] of Object.entries(lines)) {
      const t0 = performance.now();
      const div = document.createElement('div');
      div.append(render(text));
      ms[name] = Math.round(performance.now() - t0);
    }
    const samples = [
      '# Title\n\nSome *text* with `code` and **bold**.\n\n```py\nx = 1\n\ny = 2\n```\n\n- a\n- b\n\n1. one\n2. two\n\n> quote\n\nend',
      'para one\nline two\n\n~~~\nunclosed fence\n\nstill code',
      'a\r\n\r\nb **c**\r\n- d\n\n\n[l](https://example.org) ``x`y``',
    ];
    const mismatches = [];
    for (const text of samples) {
      const whole = document.createElement('div');
      whole.append(render(text));
      for (const step of [1, 3, 11]) {
        const live = new Live(document.createElement('div'));
        for (let i = step; i < text.length + step; i += step) live.update(text.slice(0, Math.min(i, text.length)));
        if (live.el.innerHTML !== whole.innerHTML) mismatches.push({ step, text: text.slice(0, 20), got: live.el.innerHTML, want: whole.innerHTML });
      }
    }
    return { ms, mismatches };
  });
  figures.markdown = r.ms;
  for (const [name, ms] of Object.entries(r.ms)) check(ms < 2000, `rendering a line of 100k (${name}) took ${ms} ms`);
  check(r.mismatches.length === 0, `streamed rendering differs from rendering the whole: ${JSON.stringify(r.mismatches[0])}`);

  // A reply line of 100k backticks (and a paragraph after it) in 1,000 chunks.
  const chunks = ['x ', ...Array.from({ length: 1000 }, () => '`'.repeat(100))];
  chunks.push('\n\nafter *that*');
  await page.route('**/v1/chat/completions', (route) => {
    const ev = (id, d) => `id: ${id}\ndata: ${JSON.stringify({ choices: [{ index: 0, delta: d, finish_reason: null }] })}\n\n`;
    let body = ev(1, { role: 'assistant', content: '' });
    chunks.forEach((t, i) => { body += ev(i + 2, { content: t }); });
    body += 'data: [DONE]\n\n';
    route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream', 'X-Sluice-Stream-Id': 'x' }, body });
  });
  const t0 = Date.now();
  await send(page, 'anything');
  await waitDone(page, 20000);
  const took = Date.now() - t0;
  await page.unroute('**/v1/chat/completions');
  const got = await page.evaluate(() => {
    const b = document.querySelector('.msg.assistant:last-child .body');
    return { len: b.querySelector('p').textContent.length, em: b.querySelector('em')?.textContent };
  });
  figures.markdown.stream_ms = took;
  check(took < 5000, `a reply of 1,000 chunks of backticks took ${took} ms to render`);
  check(got.len === 100002 && got.em === 'that', `the streamed reply rendered as ${JSON.stringify(got)}`);
}

// 6. The API key is kept in memory, never in localStorage: a new window
// asks for it again; "Remember in this tab" keeps it across a reload of the
// tab (sessionStorage) and nowhere else.
async function keys(browser) {
  const stored = (page) => page.evaluate((k) => {
    const has = (s) => Object.keys(s).filter((n) => s.getItem(n).includes(k));
    return { local: has(localStorage), session: has(sessionStorage) };
  }, key);
  const enter = async (page, remember) => {
    await page.waitForSelector('#key-dialog[open]', { timeout: 10000 });
    await page.fill('#key-input', key);
    if (remember) await page.check('#key-remember');
    await page.click('#key-save');
    await page.waitForFunction(() => document.getElementById('model').textContent !== '', null, { timeout: 10000 });
  };
  const asked = async (page) => {
    await page.waitForFunction(() => document.getElementById('key-dialog').open || document.getElementById('model').textContent !== '', null, { timeout: 10000 });
    return page.evaluate(() => document.getElementById('key-dialog').open);
  };
  for (const remember of [false, true]) {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(base + '/');
    await enter(page, remember);
    const s = await stored(page);
    check(s.local.length === 0, `the key is in localStorage (${s.local}) after it was entered`);
    check(s.session.length === (remember ? 1 : 0), `remember=${remember}: the key is in sessionStorage under ${JSON.stringify(s.session)}`);
    await page.reload();
    check(await asked(page) === !remember, `remember=${remember}: after a reload the key was ${remember ? '' : 'not '}asked for again`);
    await ctx.close();
  }
}

// 7. Closing a chat tab mid-reply: the engine view's used-block count
// falls, the reclaim is listed, and the engine had the blocks back within
// one step of noticing the reader was gone.
async function closeTab(ctx, engine) {
  const chatPage = await ctx.newPage();
  await chatPage.goto(`${base}/?view=chat`);
  await setSettings(chatPage, { max_tokens: 1500 });
  await send(chatPage, 'Tell me a very long story about a dragon who learns to paint.');
  await engine.waitForFunction(() => {
    const st = window.sluice.engine.latest;
    return st && st.running === 1 && st.seqs[0] && st.seqs[0].tokens - st.seqs[0].prompt > 20;
  }, null, { timeout: 30000 });
  const at = await engine.evaluate(() => { const st = window.sluice.engine.latest; return { steps: st.steps, used: st.kv.used, ends: st.ends.length ? st.ends.at(-1).n : 0 }; });
  const closedAt = Date.now(); // the server's clock too: same machine
  await chatPage.close();
  await engine.waitForFunction((u) => window.sluice.engine.latest.kv.used < u, at.used, { timeout: 10000 });
  const r = await engine.evaluate((at) => {
    const recent = window.sluice.engine.recent;
    const i = recent.findIndex((f) => f.steps >= at.steps && f.used < at.used);
    const st = window.sluice.engine.latest;
    return {
      fall: recent[i], step_ms: Math.max(...recent.slice(Math.max(0, i - 3), i + 1).map((f) => f.step_ms)),
      end: st.ends.find((e) => e.n > at.ends), log: document.querySelector('#ends li')?.textContent,
    };
  }, at);
  await engine.waitForFunction((u) => Number(document.getElementById('kv-used').textContent) < u, at.used, { timeout: 5000 });
  // The ends list is rendered from a later frame than the one that showed
  // the fall: wait for its newest line instead of reading it at once.
  await engine.waitForFunction(() => /aborted \(client_disconnect\)/.test(document.querySelector('#ends li')?.textContent || ''),
    null, { timeout: 5000 }).catch(() => {});
  r.log = await engine.evaluate(() => document.querySelector('#ends li')?.textContent);
  figures.close_tab = {
    steps_at_close: at.steps, steps_at_fall: r.fall.steps, used_before: at.used, used_after: r.fall.used,
    close_to_fall_ms: r.fall.at - closedAt, reclaim_ms: r.end && r.end.reclaim_ms, step_ms: r.step_ms, log: r.log,
  };
  // reclaim_ms runs from the server's cancellation of the request (it saw
  // the connection close) to the blocks back in the pool: at most the step
  // in flight, plus scheduling.
  check(r.end && r.end.finish === 'abort' && r.end.cause === 'client_disconnect' && r.end.blocks > 0, `end record ${JSON.stringify(r.end)}`);
  check(r.end && r.end.reclaim_ms <= 1.5 * r.step_ms + 5, `blocks back ${r.end && r.end.reclaim_ms} ms after the cancel; steps take ${r.step_ms} ms`);
  check(r.fall.at - closedAt < 3000, `the engine view showed the blocks back ${r.fall.at - closedAt} ms after the tab closed`);
  check(/aborted \(client_disconnect\): \d+ blocks back/.test(r.log || ''), `reclaim log line "${r.log}"`);
}

// 8. The engine view under 16 streams (a screenshot), a few of them cut.
async function load16(engine) {
  const ctls = [];
  const streams = [];
  for (let i = 0; i < 16; i++) {
    const ctl = new AbortController();
    ctls.push(ctl);
    streams.push(fetch(`${base}/v1/chat/completions`, {
      method: 'POST', signal: ctl.signal, headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: `Story number ${i}: write about a city of ${['glass', 'salt', 'rain', 'bells'][i % 4]}.` }], max_tokens: 400 + 20 * i, stream: true }),
    }).then(async (res) => { for await (const _ of res.body) { /* read on */ } }).catch(() => {}));
  }
  // Every stream admitted and past its prompt: steps are all decode.
  await engine.waitForFunction(() => {
    const r = window.sluice.engine.recent.slice(-4);
    return r.length === 4 && r.every((f) => f.running === 16) && window.sluice.engine.latest.step.decode === 16;
  }, null, { timeout: 60000 });
  const ends = await engine.evaluate(() => window.sluice.engine.seenEnds);
  for (const c of ctls.slice(0, 3)) c.abort();
  await engine.waitForFunction((n) => window.sluice.engine.seenEnds >= n + 3, ends, { timeout: 10000 });
  await new Promise((r) => setTimeout(r, 300)); // let the steps chart fill in
  const st = await engine.evaluate(() => window.sluice.engine.latest);
  figures.load16 = { running: st.running, used: st.kv.used, step_ms: st.step.ms, rows: st.step.rows };
  check(st.running === 13, `${st.running} running after cutting 3 of 16`);
  if (shots) {
    await engine.setViewportSize({ width: 1280, height: 1280 });
    await engine.waitForTimeout(400); // a few frames at the new size
    await engine.screenshot({ path: path.join(shots, 'engine-view.png') });
  }
  for (const c of ctls) c.abort();
  await Promise.all(streams);
}

// 9. Phone width and both themes: nothing overflows sideways, the tabs
// switch views, the theme changes the colours.
async function layout(ctx) {
  const page = await ctx.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(base + '/');
  await page.waitForSelector('.tabs button[data-view=engine]', { state: 'visible' });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `phone width overflows by ${overflow}px`);
  await page.click('.tabs button[data-view=engine]');
  check(await page.isVisible('#engine') && !(await page.isVisible('#chat')), 'the Engine tab does not switch views');
  await page.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: 10000 });
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const themes = {};
  for (let i = 0; i < 3; i++) {
    await page.click('#theme');
    themes[(await page.textContent('#theme')).replace('Theme: ', '')] = await bg();
  }
  figures.themes = themes;
  check(themes.light && themes.dark && themes.light !== themes.dark, `themes ${JSON.stringify(themes)}`);
  await page.close();
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  // A key an older version of the page left in localStorage is deleted at
  // load (any page of the origin can set it up).
  await page.goto(base + '/ui/style.css');
  await page.evaluate(() => localStorage.setItem('sluice.key', JSON.stringify('sk-left-by-an-old-page')));
  await page.goto(base + '/');
  // The key is asked once; the engine page gets it from this one (memory,
  // passed between the page's open tabs), never from storage.
  await page.waitForSelector('#key-dialog[open]', { timeout: 10000 });
  check(await page.evaluate(() => localStorage.getItem('sluice.key')) === null, 'the key an older page stored in localStorage is still there');
  await page.fill('#key-input', key);
  await page.click('#key-save');
  await page.waitForFunction(() => document.getElementById('model').textContent !== '', null, { timeout: 10000 });
  check(!(await page.evaluate((k) => Object.keys(localStorage).some((n) => localStorage.getItem(n).includes(k)), key)), 'the key is in localStorage');
  const engine = await ctx.newPage();
  engine.on('pageerror', (e) => failures.push(`engine page error: ${e.message}`));
  await engine.goto(`${base}/?view=engine`);
  await engine.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: 10000 });
  check(!(await engine.evaluate(() => document.getElementById('key-dialog').open)), 'the key was asked for again');
  for (const [name, run] of [['streams', () => streams(page)], ['stops', () => stops(page)], ['resumes', () => resumes(page)],
    ['escapes', () => escapes(page)], ['markdown', () => markdown(page)], ['keys', () => keys(browser)], ['closeTab', () => closeTab(ctx, engine)], ['load16', () => load16(engine)], ['layout', () => layout(ctx)]]) {
    if (process.env.ONLY && !process.env.ONLY.split(',').includes(name)) continue;
    try { await run(); } catch (e) { failures.push(`${name}: ${e.message.split('\n')[0]}`); }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify({ ok: failures.length === 0, failures, figures }));

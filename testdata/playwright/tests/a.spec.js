'use strict';
const fs = require('node:fs');
const { test, expect, createSession, hold } = require('./fixtures.js');

test('a: sessions live until the run releases them', async ({ request, server }, testInfo) => {
  const sessions = [await createSession(request), await createSession(request)];
  expect(sessions[0].pid).not.toBe(sessions[1].pid);
  await hold(testInfo, server, sessions);
  const res = await request.get('/healthz');
  expect(res.ok()).toBeTruthy();
});

test('a: DELETE ends a session', async ({ request }) => {
  const s = await createSession(request);
  const res = await request.delete(`/sessions/${encodeURIComponent(s.id)}`);
  expect(res.ok(), `DELETE: ${res.status()}`).toBeTruthy();
  expect(fs.existsSync(s.socket), `${s.socket} is gone`).toBeFalsy();
});

test('a: reset ends every session', async ({ request }) => {
  const sessions = [await createSession(request), await createSession(request)];
  const res = await request.post('/reset');
  expect(res.ok(), `POST /reset: ${res.status()}`).toBeTruthy();
  for (const s of sessions) expect(fs.existsSync(s.socket), `${s.socket} is gone`).toBeFalsy();
  // The server still works after a reset.
  await createSession(request);
});

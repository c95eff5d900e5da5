'use strict';
const { test, expect, createSession, hold } = require('./fixtures.js');

test('b: sessions live until the run releases them', async ({ request, server }, testInfo) => {
  const sessions = [await createSession(request), await createSession(request)];
  await hold(testInfo, server, sessions);
  const res = await request.get('/healthz');
  expect(res.ok()).toBeTruthy();
});

test('b: healthz answers', async ({ request }) => {
  const res = await request.get('/healthz');
  expect(res.ok()).toBeTruthy();
});

test('b: an unknown session is not found', async ({ request }) => {
  const res = await request.delete('/sessions/no-such-session');
  expect(res.status()).toBe(404);
});

test('b: a session left running is ended with its server', async ({ request }) => {
  // Nothing deletes this one: stopping the worker's server must end it.
  await createSession(request);
});

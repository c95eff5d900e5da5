'use strict';
// Fixtures: every worker owns one e2e-server, started through ownerjournal
// (`ownerjournal run -- e2e-server ...`), and Playwright's `request`
// fixture talks to it (baseURL is the worker's server).
const fs = require('node:fs');
const path = require('node:path');
const { test: base, expect } = require('@playwright/test');
const ownerjournal = require('ownerjournal');
const { writeJSONAtomic, waitFile } = require('./sync.js');

const test = base.extend({
  server: [async ({}, use, workerInfo) => {
    // playwright.webserver.config.js: Playwright's webServer owns the
    // (one, shared) server; there is no process of ours to report.
    if (process.env.OJ_PW_WEBSERVER_PORT) {
      await use({ url: `http://127.0.0.1:${process.env.OJ_PW_WEBSERVER_PORT}`, pid: 0, serverPid: 0, addr: '' });
      return;
    }
    const root = process.env[ownerjournal.ENV_ROOT];
    const bin = process.env.OJ_E2E_SERVER;
    if (!bin) throw new Error('OJ_E2E_SERVER is not set: global-setup.js provides it');
    // A file, not the worker's pipes: a server writing into the runner's
    // pipe would die of SIGPIPE if the runner were SIGKILLed.
    fs.mkdirSync(workerInfo.project.outputDir, { recursive: true });
    const log = path.join(workerInfo.project.outputDir, `e2e-server-worker${workerInfo.workerIndex}.log`);
    const server = await ownerjournal.startServer(bin, ['--root', root, '--addr', '127.0.0.1:0'], {
      label: `e2e-server of worker ${workerInfo.workerIndex}`,
      log,
    });
    await use(server);
    await server.stop();
  }, { scope: 'worker' }],

  baseURL: async ({ server }, use) => {
    await use(server.url);
  },
});

// socketPath resolves a session's socket (absolute, or relative to the root).
function socketPath(s) {
  return path.isAbsolute(s.socket) ? s.socket : path.join(process.env[ownerjournal.ENV_ROOT], s.socket);
}

// createSession creates a tmux session over HTTP and checks that its tmux
// server is a live process with its socket inside the run's root.
async function createSession(request) {
  const res = await request.post('/sessions');
  expect(res.ok(), `POST /sessions: ${res.status()} ${await res.text()}`).toBeTruthy();
  const s = await res.json();
  expect(s).toMatchObject({ id: expect.any(String), socket: expect.any(String), pid: expect.any(Number) });
  const sock = socketPath(s);
  expect(path.dirname(fs.realpathSync(sock)).startsWith(fs.realpathSync(process.env[ownerjournal.ENV_ROOT]))).toBeTruthy();
  expect(fs.lstatSync(sock).isSocket(), `${sock} is a socket`).toBeTruthy();
  expect(fs.existsSync(`/proc/${s.pid}`), `tmux server ${s.pid} is alive`).toBeTruthy();
  return { ...s, socket: sock };
}

// hold reports this worker's processes and sessions to the Go test that
// drives the run (OJ_PW_SYNC), then waits until that test releases it: the
// test kills processes from outside at this point. Without OJ_PW_SYNC it
// returns at once.
async function hold(testInfo, server, sessions) {
  const dir = process.env.OJ_PW_SYNC;
  if (!dir) return;
  writeJSONAtomic(path.join(dir, `ready-${testInfo.parallelIndex}.json`), {
    title: testInfo.title,
    parallelIndex: testInfo.parallelIndex,
    workerIndex: testInfo.workerIndex,
    workerPid: process.pid,
    runnerPid: process.ppid,
    root: process.env[ownerjournal.ENV_ROOT],
    runPid: server.pid,
    serverPid: server.serverPid,
    addr: server.addr,
    sessions,
  });
  await waitFile(path.join(dir, 'release'));
}

module.exports = { test, expect, createSession, hold, socketPath };

'use strict';
// The test body shared by the Jest and Vitest projects (testdata/jest,
// testdata/vitest): each test file owns an e2e-server through the
// ownerjournal helper (`ownerjournal run -- e2e-server ...`) and creates
// tmux sessions over HTTP with fetch; tmux servers daemonize (setsid), so a
// run that dies leaves real work for recovery. When a Go test drives the
// run (OJ_PW_SYNC), hold() reports the processes to it and waits for its
// release, through files published atomically (see
// testdata/playwright/tests/sync.js).
//
// The helper is passed in (`require('./kit.js')(require('ownerjournal'))`)
// so that it is the project's installed copy: this file lives outside the
// projects' node_modules.
const fs = require('node:fs');
const path = require('node:path');
const { isMainThread } = require('node:worker_threads');
const { writeJSONAtomic, waitFile } = require('../playwright/tests/sync.js');

module.exports = function kit(ownerjournal) {
  const root = () => process.env[ownerjournal.ENV_ROOT];

  // startServer owns an e2e-server (OJ_E2E_SERVER: a built binary; these
  // projects need no Go toolchain) in the run's root.
  async function startServer(label) {
    const bin = process.env.OJ_E2E_SERVER;
    if (!bin) throw new Error('OJ_E2E_SERVER is not set: name a built cmd/e2e-server binary');
    // A file, not the worker's pipes: a server writing into the runner's
    // pipe would die of SIGPIPE if the runner were SIGKILLed.
    const out = process.env.OJ_PW_OUTPUT || fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'oj-e2e-'));
    fs.mkdirSync(out, { recursive: true });
    return ownerjournal.startServer(bin, ['--root', root(), '--addr', '127.0.0.1:0'], {
      label: `e2e-server of ${label}`,
      log: path.join(out, `e2e-server-${label}-${process.pid}.log`),
    });
  }

  // createSession creates a tmux session over HTTP and checks that its
  // server is a live process with its socket inside the run's root.
  async function createSession(server) {
    const res = await fetch(`${server.url}/sessions`, { method: 'POST' });
    if (!res.ok) throw new Error(`POST /sessions: ${res.status} ${await res.text()}`);
    const s = await res.json();
    const socket = path.isAbsolute(s.socket) ? s.socket : path.join(root(), s.socket);
    if (!fs.realpathSync(path.dirname(socket)).startsWith(fs.realpathSync(root()))) throw new Error(`${socket} is outside the root`);
    if (!fs.lstatSync(socket).isSocket()) throw new Error(`${socket} is not a socket`);
    if (!fs.existsSync(`/proc/${s.pid}`)) throw new Error(`tmux server ${s.pid} is not alive`);
    return { ...s, socket };
  }

  // hold reports this test's processes to the Go test that drives the run
  // (OJ_PW_SYNC) as ready-INDEX.json, then waits for its release file.
  // Under Vitest's threads pool the "worker" is the runner process itself.
  async function hold(index, title, server, sessions) {
    const dir = process.env.OJ_PW_SYNC;
    if (!dir) return;
    const runnerPid = isMainThread ? process.ppid : process.pid;
    writeJSONAtomic(path.join(dir, 'runner.json'), { pid: runnerPid });
    writeJSONAtomic(path.join(dir, `ready-${index}.json`), {
      title,
      parallelIndex: index,
      workerPid: process.pid,
      runnerPid,
      root: root(),
      runPid: server.pid,
      serverPid: server.serverPid,
      addr: server.addr,
      sessions,
    });
    await waitFile(path.join(dir, 'release'));
  }

  // suite registers one test file's tests with the runner's API (Jest's
  // globals or Vitest's exports): a server for the file, a test that holds
  // two sessions until the Go test releases it (ready-INDEX.json), and one
  // that ends a session.
  function suite(index, name, { test, expect, beforeAll, afterAll }) {
    let server;
    beforeAll(async () => {
      server = await startServer(name);
    });
    afterAll(async () => {
      if (server) await server.stop();
    });
    const holdTitle = `${name}: sessions live until the run releases them`;
    test(holdTitle, async () => {
      const sessions = [await createSession(server), await createSession(server)];
      expect(sessions[0].pid).not.toBe(sessions[1].pid);
      await hold(index, holdTitle, server, sessions);
      expect((await fetch(`${server.url}/healthz`)).ok).toBe(true);
    });
    test(`${name}: DELETE ends a session`, async () => {
      const s = await createSession(server);
      const res = await fetch(`${server.url}/sessions/${encodeURIComponent(s.id)}`, { method: 'DELETE' });
      expect(res.ok).toBe(true);
      expect(fs.existsSync(s.socket)).toBe(false);
    });
  }

  return { startServer, createSession, hold, suite };
};

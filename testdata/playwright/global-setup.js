'use strict';
// Runs in Playwright's runner process before ownerjournal's globalSetup
// and before any worker starts. It provides the binaries the run uses and,
// when a Go test drives the run (OJ_PW_SYNC), announces the runner's PID.
//
// The e2e-server is a binary built once per run, never `go run` (whose
// wrapper PID is not the server's): the Go tests build it once and pass
// OJ_E2E_SERVER and OWNERJOURNAL_BIN; without them it is built here into
// .bin/ (atomically: a temp name, then rename, so that a concurrent run
// keeps executing the binary it started with).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { writeJSONAtomic } = require('./tests/sync.js');

const repo = path.resolve(__dirname, '..', '..');
const binDir = path.join(__dirname, '.bin');

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

function build(pkg, name) {
  fs.mkdirSync(binDir, { recursive: true });
  // Temp files of builds killed half-way (their PID is in the name).
  for (const f of fs.readdirSync(binDir)) {
    const m = /^\..*\.(\d+)\.tmp$/.exec(f);
    if (m && !alive(Number(m[1]))) fs.rmSync(path.join(binDir, f), { force: true });
  }
  const out = path.join(binDir, name);
  const tmp = path.join(binDir, `.${name}.${process.pid}.tmp`);
  try {
    execFileSync('go', ['build', '-o', tmp, pkg], { cwd: repo, stdio: 'inherit' });
    fs.renameSync(tmp, out);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return out;
}

module.exports = async function globalSetup() {
  if (!process.env.OWNERJOURNAL_BIN) process.env.OWNERJOURNAL_BIN = build('./cmd/ownerjournal', 'ownerjournal');
  if (!process.env.OJ_E2E_SERVER) process.env.OJ_E2E_SERVER = build('./cmd/e2e-server', 'e2e-server');
  for (const v of ['OWNERJOURNAL_BIN', 'OJ_E2E_SERVER']) {
    fs.accessSync(process.env[v], fs.constants.X_OK);
  }
  const sync = process.env.OJ_PW_SYNC;
  if (sync) writeJSONAtomic(path.join(sync, 'runner.json'), { pid: process.pid, ppid: process.ppid });
};

'use strict';
/**
 * ownerjournal: a zero-dependency CommonJS helper that wraps the
 * `ownerjournal` CLI for Node test runners: Playwright and Jest (see
 * global-setup.js and global-teardown.js) and Vitest (vitest.js); nothing
 * here depends on any of them. The binary comes from this platform's
 * package (see platform.js).
 *
 * In the runner process:
 *
 *   setup()      creates the run's private root (`ownerjournal root NAME`),
 *                exports it as OWNERJOURNAL_ROOT so that workers inherit it,
 *                and recovers what dead earlier runs of this user left in
 *                the same base directory: `ownerjournal recover --json`
 *                (orphans only) on every other root there. A live run's
 *                root is never touched: its root-owner record names a live
 *                owner.
 *   teardown()   `ownerjournal recover --all --json` on the run's root,
 *                synchronously; prints one summary line; throws when the
 *                exit status is 3 (something was retained, the root was
 *                kept) or recovery failed, which fails the run.
 *
 * In worker processes:
 *
 *   startServer(cmd, args, opts)  spawns `ownerjournal run -- cmd args...
 *                --ready-file F`, waits for F ({"pid":..,"addr":".."}) and
 *                returns the owned server with stop().
 *   spawnOwned(cmd, args, opts)   the same without the readiness protocol.
 *
 * Guarantees, and how:
 *
 *  - A spawned `ownerjournal run` is a supervisor: CMD runs in its own
 *    process group; if the worker dies (SIGKILL included) run gets its
 *    parent-death signal (SIGTERM) and ends CMD's whole tree, daemonized
 *    descendants such as tmux servers included.
 *  - teardown() is synchronous on purpose. When a second Ctrl-C arrives
 *    during global teardown, Playwright stops waiting for the teardown
 *    promise and exits; a blocked event loop cannot run that handler before
 *    recovery has finished. The `recover` child is in the terminal's
 *    process group too (spawnSync cannot detach it): it keeps SIGINT and
 *    SIGTERM caught from early on until it is done, and if a Ctrl-C kills
 *    it before that, teardown runs it again (recovery is idempotent and
 *    serialised by the root's lock).
 *  - setup() installs a safety net in the runner: if the process exits
 *    (process.exit, an uncaught error) before teardown() ran, an 'exit'
 *    handler runs the same recovery synchronously; if SIGINT, SIGTERM or
 *    SIGHUP arrives while no other listener would handle it (so the default
 *    action would kill the process), it recovers first and then dies by
 *    the same signal.
 *  - SIGKILL of the runner cannot be caught: the next run's setup()
 *    recovers that root, whose owner (the dead runner) is then verified
 *    dead by identity (PID, start time, boot id), never by PID alone.
 *
 * Caveat: a server whose stdout/stderr is inherited from a worker writes
 * into a pipe that Playwright's runner reads; if the runner is SIGKILLed,
 * such writes fail with EPIPE (Go programs die of SIGPIPE on fd 1 and 2).
 * Pass `log` to give the server a file instead.
 */

const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { threadId } = require('node:worker_threads');

/** The environment variable that names the run's root (inherited by workers). */
const ENV_ROOT = 'OWNERJOURNAL_ROOT';
const { ENV_BIN, findBinary } = require('./platform.js');

/** Exit statuses of the CLI (see the CLI contract in the README). */
const EXIT = Object.freeze({ OK: 0, FAIL: 1, USAGE: 2, RETAINED: 3 });

/** Signals whose default action would end the runner without teardown. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** How many times teardown runs recovery again after a signal killed it early. */
const MAX_RETRIES = 5;

/**
 * The runner's state lives on `process` under a global symbol, so that
 * globalSetup and globalTeardown share it even if a loader gives them two
 * copies of this module.
 */
const STATE = Symbol.for('ownerjournal.runner');

/** OwnerJournalError is thrown for a failed CLI call or a retained root. */
class OwnerJournalError extends Error {
  constructor(message, { status = null, report = null, stderr = '' } = {}) {
    super(message);
    this.name = 'OwnerJournalError';
    this.status = status;
    this.report = report;
    this.stderr = stderr;
  }
}

/**
 * binary returns the path of the ownerjournal binary: this platform's
 * package (@ownerjournal/OS-CPU, an optional dependency), else
 * $OWNERJOURNAL_BIN, else `ownerjournal` on PATH (see platform.js). When
 * none fits it throws an OwnerJournalError that names the missing platform
 * package.
 */
function binary() {
  try {
    return findBinary().path;
  } catch (err) {
    if (err.code !== 'OWNERJOURNAL_NO_BINARY') throw err;
    throw new OwnerJournalError(err.message);
  }
}

function spawnError(err) {
  const hint = err.code === 'ENOENT' ? ` (not found: install ownerjournal or set ${ENV_BIN})` : '';
  return new OwnerJournalError(`ownerjournal: cannot run ${binary()}: ${err.message}${hint}`);
}

/**
 * logFile returns an open, already unlinked temporary file to give a
 * child as its stderr. With a pipe, the child would die of SIGPIPE on its
 * next log line if this process died (Go programs do on fd 2), half-way
 * through a recovery; a file never breaks, and an unlinked one leaves
 * nothing behind whatever happens to this process.
 */
function logFile() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ownerjournal-'));
  let fd;
  try {
    fd = fs.openSync(path.join(dir, 'stderr'), 'w+', 0o600);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  let open = true;
  return {
    fd,
    read() {
      if (!open) return '';
      const b = Buffer.alloc(fs.fstatSync(fd).size);
      fs.readSync(fd, b, 0, b.length, 0);
      return b.toString('utf8');
    },
    close() {
      if (open) fs.closeSync(fd);
      open = false;
    },
  };
}

/**
 * cliSync runs the CLI and waits; it throws only if the binary cannot run.
 * The CLI's stderr goes to an unlinked file (see logFile), its stdout (the
 * --json report, written last) to a pipe.
 */
function cliSync(args, { env } = {}) {
  const log = logFile();
  try {
    const r = spawnSync(binary(), args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', log.fd],
      env: env || process.env,
      maxBuffer: 64 << 20,
    });
    if (r.error) throw spawnError(r.error);
    return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: log.read() };
  } finally {
    log.close();
  }
}

/**
 * cliAsync is cliSync without blocking the event loop. With detached, the
 * CLI runs in a session and process group of its own, so that a Ctrl-C on
 * the terminal (SIGINT to the foreground process group) does not reach it.
 */
function cliAsync(args, { env, detached = false } = {}) {
  return new Promise((resolve, reject) => {
    const log = logFile();
    let child;
    try {
      child = spawn(binary(), args, { stdio: ['ignore', 'pipe', log.fd], env: env || process.env, detached });
    } catch (err) {
      log.close();
      throw err;
    }
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    // A child that cannot start emits 'error' and may still emit 'close'.
    child.once('error', (err) => {
      log.close();
      reject(spawnError(err));
    });
    child.once('close', (status, signal) => {
      const stderr = log.read();
      log.close();
      resolve({ status, signal, stdout, stderr });
    });
  });
}

function parseJSON(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function failure(what, r) {
  const how = r.signal ? `was killed by ${r.signal}` : `exited ${r.status}`;
  const err = (r.stderr || '').trim();
  return new OwnerJournalError(`ownerjournal: ${what} ${how}${err ? `: ${err}` : ''}`, { status: r.status, stderr: r.stderr });
}

/**
 * say writes line to file descriptor 1 synchronously: the runner may die
 * by a signal right after (the safety net re-raises it), and Jest replaces
 * process.stdout.write with a buffer that its reporter flushes later, so a
 * line written through the stream would be lost. The stream is the
 * fallback when the descriptor refuses (EAGAIN on a full non-blocking pipe).
 */
function say(line) {
  try {
    fs.writeSync(1, line + '\n');
    return;
  } catch {
    // fall back to the stream below
  }
  try {
    process.stdout.write(line + '\n');
  } catch {
    // stdout is gone (a closed pipe): nothing else to say it on.
  }
}

/** defaultName is a root name unique to this runner process. */
function defaultName() {
  return `pw-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
}

/**
 * createRoot creates (or validates) the private root NAME under the default
 * base directory and returns its path. The root's owner record names the
 * calling process (the CLI's parent), so orphans-only recovery by anyone
 * else leaves the root alone while this process lives.
 */
function createRoot(name) {
  const r = cliSync(['root', name]);
  if (r.status !== EXIT.OK) throw failure(`root ${name}`, r);
  const root = r.stdout.trim();
  if (!path.isAbsolute(root)) throw new OwnerJournalError(`ownerjournal: root ${name} printed ${JSON.stringify(r.stdout)}, not a path`);
  return root;
}

/**
 * setup is the body of globalSetup. It returns the run's root. With
 * OWNERJOURNAL_ROOT already set it reuses that root (validated), and
 * teardown then ends only what is orphaned in it and keeps it, leaving the
 * rest to whoever created it; otherwise it creates one, exports it, and
 * recovers stale roots of earlier runs.
 *
 * Options: name (the root's name; default pw-PID-RANDOM), recoverStale
 * (default true), log (a function taking one line; default stdout).
 */
async function setup({ name, recoverStale: doStale = true, log = say } = {}) {
  if (process[STATE]) return process[STATE].root;
  let root = process.env[ENV_ROOT];
  let created = false;
  if (root) {
    const r = cliSync(['status', '--root', root, '--json']);
    if (r.status !== EXIT.OK && r.status !== EXIT.RETAINED) throw failure(`status --root ${root}`, r);
  } else {
    root = createRoot(name || defaultName());
    created = true;
    process.env[ENV_ROOT] = root;
  }
  process[STATE] = { root, created, done: false, result: null, handlers: {} };
  installSafetyNet(process[STATE]);
  if (created && doStale) {
    const s = await recoverStale(path.dirname(root), { except: root });
    if (s.roots.length > 0) log(s.line);
  }
  return root;
}

/**
 * recoverStale runs orphans-only recovery (`ownerjournal recover --json`,
 * no --all) on every root in base except `except`, in parallel. A root
 * whose owners are alive is left as it is (its in-use records are not
 * touched and it is kept); a dead run's root has its orphans ended, its
 * sockets and paths removed, and is removed itself. Entries whose name
 * starts with '.' (removals in progress) are skipped. It returns
 * {roots, results, line}; it never throws for one root's failure.
 */
async function recoverStale(base, { except } = {}) {
  let names;
  try {
    names = fs.readdirSync(base);
  } catch (err) {
    if (err.code === 'ENOENT') return { roots: [], results: [], line: '' };
    throw err;
  }
  const roots = [];
  for (const n of names.sort()) {
    const p = path.join(base, n);
    if (n.startsWith('.') || p === except) continue;
    let st;
    try {
      st = fs.lstatSync(p);
    } catch {
      continue; // removed meanwhile by another recoverer: progress
    }
    if (st.isDirectory()) roots.push(p);
  }
  const results = await Promise.all(roots.map(async (root) => {
    const r = await cliAsync(['recover', '--root', root, '--missing-ok', '--json'], { detached: true });
    return { root, ...r, report: parseJSON(r.stdout) };
  }));
  let removed = 0;
  let kept = 0;
  let retained = 0;
  let failed = 0;
  let ended = 0;
  for (const r of results) {
    for (const a of (r.report && r.report.records) || []) {
      if (a.verdict === 'orphan' && !a.retained) ended++;
    }
    if (r.status === EXIT.RETAINED) retained++;
    else if (r.status !== EXIT.OK) failed++;
    else if (r.report && (r.report.root_removed || r.report.root_missing)) removed++; // gone either way
    else kept++;
  }
  const line = `ownerjournal: ${roots.length} other root(s) in ${base}: ${removed} stale removed ` +
    `(${ended} orphan(s) ended), ${kept} in use (kept), ${retained} retained, ${failed} failed` +
    results.filter((r) => r.status !== EXIT.OK).map((r) => `; ${r.root}: ${(r.stderr || '').trim() || `exit ${r.status}`}`).join('');
  return { roots, results, line };
}

function countVerdicts(report) {
  const counts = {};
  for (const a of (report && report.records) || []) counts[a.verdict] = (counts[a.verdict] || 0) + 1;
  return Object.entries(counts).map(([v, n]) => `${n} ${v}`).join(', ');
}

/**
 * teardown is the body of globalTeardown: `ownerjournal recover --all
 * --json` on the run's root, run synchronously (see the file comment); for
 * a reused root `ownerjournal recover --keep-root --json` (orphans only:
 * by global teardown the workers and their servers are gone, so what they
 * owned is orphaned, while the root's creator and its records live on). It
 * prints one summary line and returns {status, report, line}. It throws an
 * OwnerJournalError when the exit status is 3 (something was retained and
 * the root was kept) or recovery failed. It runs once per process; later
 * calls return the first result. Without a preceding setup() in this
 * process it does nothing and returns null.
 */
function teardown({ reason = 'globalTeardown', log = say } = {}) {
  const st = process[STATE];
  if (!st) {
    log('ownerjournal: no root was set up in this process; nothing to recover');
    return null;
  }
  if (st.done) return st.result;
  st.done = true;
  const mode = st.created ? ['--all'] : ['--keep-root'];
  const what = `recover ${mode.join(' ')}`;
  // --missing-ok: a teardown can run twice (an 'exit' handler after
  // globalTeardown, a retry after a signal killed the first run); a root
  // already gone is then nothing to recover, not a failure.
  const args = ['recover', '--root', st.root, ...mode, '--missing-ok', '--json'];
  const t0 = Date.now();
  let r;
  const killed = [];
  for (;;) {
    r = cliSync(args);
    // A recover killed by SIGINT, SIGTERM or SIGHUP died before it caught
    // them (from then on it keeps them caught until it is done): a Ctrl-C
    // on the terminal reaches it too, and a second one can land in that
    // window. Recovery is idempotent and serialised by the root's lock:
    // run it again.
    if (!r.signal || !SIGNALS.includes(r.signal) || parseJSON(r.stdout) || killed.length >= MAX_RETRIES) break;
    killed.push(r.signal);
  }
  const report = parseJSON(r.stdout);
  const status = r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
  let outcome = 'no report';
  if (report) {
    outcome = `${report.records.length} record(s)${report.records.length ? ` (${countVerdicts(report)})` : ''}, ` +
      `${report.retained} retained, ` + (report.root_removed ? 'root removed' : report.root_missing ? 'no root (already gone)' : `root kept: ${report.root_kept || 'unknown reason'}`);
    for (const a of report.records) {
      if (a.retained) outcome += `; retained ${a.verdict} ${a.id || a.path}${a.label ? ` (${a.label})` : ''}: ${a.retained}`;
    }
    for (const p of report.problems || []) outcome += `; problem: ${p}`;
  }
  if (killed.length) outcome += `; ${killed.length} earlier attempt(s) killed by ${killed.join(', ')} before they caught signals`;
  const line = `ownerjournal: ${what} ${st.root} (${reason}): ${status}; ${outcome}; ${Date.now() - t0} ms`;
  log(line);
  st.result = { status: r.status, signal: r.signal, report, line };
  const logs = (r.stderr || '').trim();
  if (r.status === EXIT.RETAINED) {
    throw new OwnerJournalError(`ownerjournal: ${what} exited 3: something was retained and the root was kept; ` +
      `inspect it with: ${binary()} status --root ${st.root}` + (logs ? `\n${logs}` : ''), { status: r.status, report, stderr: r.stderr });
  }
  // 128+n: recovery ran to its end while a signal (a Ctrl-C) was pending;
  // the report says whether it is complete.
  const interruptedButClean = r.status > 128 && report && report.retained === 0;
  if (r.status !== EXIT.OK && !interruptedButClean) throw failure(what, r);
  return st.result;
}

function installSafetyNet(st) {
  process.on('exit', (code) => {
    if (st.done) return;
    try {
      teardown({ reason: `runner exiting with code ${code} before globalTeardown` });
    } catch (err) {
      say(`${err.name}: ${err.message}`);
      if (!process.exitCode) process.exitCode = 1;
    }
  });
  for (const sig of SIGNALS) {
    const handler = () => {
      // Another listener (Playwright's Ctrl-C handling) decides what this
      // signal means; if it exits, the 'exit' handler above recovers.
      if (process.listeners(sig).some((l) => l !== handler)) return;
      // Nobody else would handle it: the default action would end the
      // process here, without teardown. Recover, then die the same way.
      if (!st.done) {
        try {
          teardown({ reason: `${sig} with no other handler` });
        } catch (err) {
          say(`${err.name}: ${err.message}`);
        }
      }
      for (const [s, h] of Object.entries(st.handlers)) process.removeListener(s, h);
      process.kill(process.pid, sig);
    };
    st.handlers[sig] = handler;
    process.on(sig, handler);
  }
}

/** requireRoot returns the run's root or throws a clear error. */
function requireRoot() {
  const root = process.env[ENV_ROOT];
  if (!root) {
    throw new OwnerJournalError(`ownerjournal: ${ENV_ROOT} is not set: add the ownerjournal globalSetup to the ` +
      'Playwright config (see the README), or run under `ownerjournal root`');
  }
  return root;
}

/**
 * spawnOwned starts `ownerjournal run [--label L] -- command args...` in
 * the run's root and returns {child, pid, exited, stop}. pid is the
 * supervisor's; exited resolves to {code, signal} (or {error}); stop()
 * sends SIGTERM to the supervisor (which ends the whole tree and exits) and
 * waits, escalating to SIGKILL after `timeout` ms (the journal then holds
 * whatever survived, for teardown).
 *
 * Options: label, log (a file for the supervisor's and the command's
 * stdout and stderr; default: inherited), grace (a Go duration string,
 * e.g. "2s"), env.
 */
function spawnOwned(command, args = [], { label, log, grace, env } = {}) {
  const root = requireRoot();
  const runArgs = ['run', '--root', root];
  if (label) runArgs.push('--label', label);
  if (grace) runArgs.push('--grace', grace);
  runArgs.push('--', command, ...args);
  let fd;
  let stdio = ['ignore', 'inherit', 'inherit'];
  if (log) {
    fd = fs.openSync(log, 'a', 0o600);
    stdio = ['ignore', fd, fd];
  }
  let child;
  try {
    // OWNERJOURNAL_SPAWNER: if this process dies before `run` has set its
    // parent-death signal, run sees that its parent is no longer us.
    child = spawn(binary(), runArgs, { stdio, env: { ...(env || process.env), OWNERJOURNAL_SPAWNER: String(process.pid) } });
  } finally {
    if (fd !== undefined) fs.closeSync(fd); // the child holds its own copy
  }
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ error: spawnError(error) }));
  });
  const stop = async ({ timeout = 30_000 } = {}) => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  return { child, pid: child.pid, exited, stop };
}

/**
 * waitReady resolves with the parsed JSON of file once it holds a complete
 * ready document: a JSON object with a string "addr". A server may write
 * the file in several steps (the recommended way is atomic: write a temp
 * file in the same directory, then rename it over F); waitReady re-reads it
 * on every change until it parses. It waits on inotify (fs.watch) of the
 * file's directory, not by polling, and rejects as soon as child exits
 * first. The timeout is a safety net against a hang; nothing waits for it
 * to pass. Its error names the file and the last content read.
 */
function waitReady(file, child, timeout) {
  return new Promise((resolve, reject) => {
    let done = false;
    let watcher = null;
    let timer = null;
    let last = null; // the last content read, when it did not parse
    const finish = (err, value) => {
      if (done) return;
      done = true;
      if (watcher) watcher.close();
      clearTimeout(timer);
      child.removeListener('exit', onExit);
      if (err) reject(err);
      else resolve(value);
    };
    const lastContent = () => (last === null ? '' : `; last content: ${JSON.stringify(last)}`);
    const check = () => {
      let text;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (err) {
        if (err.code !== 'ENOENT') finish(err);
        return false;
      }
      const v = parseJSON(text);
      if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof v.addr !== 'string') {
        last = text; // incomplete: a later change completes it
        return false;
      }
      finish(null, v);
      return true;
    };
    const onExit = (code, signal) => {
      if (!check()) finish(new OwnerJournalError(`ownerjournal: server exited (${signal || `code ${code}`}) before it wrote a complete ready file ${file}${lastContent()}`));
    };
    child.on('exit', onExit);
    watcher = fs.watch(path.dirname(file), check);
    watcher.on('error', finish);
    timer = setTimeout(() => {
      if (check()) return;
      finish(new OwnerJournalError(last === null
        ? `ownerjournal: no ready file ${file} after ${timeout} ms`
        : `ownerjournal: ready file ${file} is not complete JSON after ${timeout} ms${lastContent()}`));
    }, timeout);
    check();
  });
}

let serverSeq = 0;

/**
 * startServer owns a server that announces readiness through a ready file
 * (`--ready-file F`, JSON {"pid": N, "addr": "host:port"}): it runs
 * `ownerjournal run -- command args... readyFlag F` and resolves, once F
 * exists, to spawnOwned's result plus {ready, serverPid, addr, url}.
 *
 * F lives inside the root, in a directory recorded in the journal before
 * it is created (subject and owner: this worker), so that a worker killed
 * at any point leaves nothing that recovery cannot name and remove; the
 * directory and its record are removed once the server is ready.
 *
 * Options: spawnOwned's, plus readyFlag (default "--ready-file") and
 * timeout (ms, default 30000).
 */
async function startServer(command, args = [], { readyFlag = '--ready-file', timeout = 30_000, label, ...opts } = {}) {
  const root = requireRoot();
  label = label || `${path.basename(command)} of pid ${process.pid}`;
  // The thread id too: Vitest's threads pool runs test files in worker
  // threads of one process, each with its own copy of this module.
  const dirName = `ready-${process.pid}-${threadId}-${++serverSeq}`;
  const pub = await cliAsync(['publish', '--root', root, '--pid', String(process.pid), '--no-group',
    '--label', `ready file of ${label}`, '--path', dirName]);
  if (pub.status !== EXIT.OK) throw failure('publish', pub);
  const recordID = pub.stdout.trim();
  const dir = path.join(root, dirName);
  const readyFile = path.join(dir, 'ready.json');
  let owned;
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
    owned = spawnOwned(command, [...args, readyFlag, readyFile], { label, ...opts });
    const ready = await waitReady(readyFile, owned.child, timeout);
    return Object.assign(owned, { ready, serverPid: ready.pid, addr: ready.addr, url: `http://${ready.addr}` });
  } catch (err) {
    if (owned) await owned.stop();
    throw err;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    const r = await cliAsync(['retire', '--root', root, recordID]);
    if (r.status !== EXIT.OK) say(failure(`retire ${recordID}`, r).message);
  }
}

module.exports = {
  ENV_ROOT,
  ENV_BIN,
  EXIT,
  OwnerJournalError,
  /** Path of the module to name as Playwright's globalSetup. */
  globalSetup: require.resolve('./global-setup.js'),
  /** Path of the module to name as Playwright's globalTeardown. */
  globalTeardown: require.resolve('./global-teardown.js'),
  setup,
  teardown,
  recoverStale,
  createRoot,
  spawnOwned,
  startServer,
  waitReady,
};

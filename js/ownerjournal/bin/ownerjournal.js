#!/usr/bin/env node
'use strict';
// The `ownerjournal` command of the npm package: runs the binary of this
// platform's package (see platform.js) with the same arguments, standard
// streams and environment, and exits as it did (by the same signal if it
// was killed). SIGTERM and SIGHUP sent to this wrapper are passed on to the
// binary, which decides what they mean. SIGINT is not: a terminal's Ctrl-C
// reaches the binary directly (same process group), and passing it on
// would make one Ctrl-C look like two; the wrapper just waits.
const { spawn } = require('node:child_process');
const { findBinary } = require('../platform.js');

let bin;
try {
  bin = findBinary().path;
} catch (err) {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}
const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' });
process.on('SIGINT', () => {});
for (const sig of ['SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    try {
      child.kill(sig);
    } catch {
      // already gone
    }
  });
}
child.once('error', (err) => {
  process.stderr.write(`ownerjournal: cannot run ${bin}: ${err.message}\n`);
  process.exit(1);
});
child.once('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code);
});

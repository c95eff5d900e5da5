'use strict';
// Runs before ownerjournal's globalTeardown. When a Go test drives the run
// (OJ_PW_SYNC), it announces that global teardown has begun, so that the
// test can press "Ctrl-C" a second time while cleanup runs.
const path = require('node:path');
const { writeJSONAtomic } = require('./tests/sync.js');

module.exports = async function globalTeardown() {
  const sync = process.env.OJ_PW_SYNC;
  if (sync) writeJSONAtomic(path.join(sync, 'teardown.json'), { pid: process.pid });
};

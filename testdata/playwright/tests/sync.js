'use strict';
// Rendezvous with the Go test that drives a run, through files in the
// directory OJ_PW_SYNC: files are published atomically (temp + rename) and
// waited for with inotify (fs.watch), never by sleeping.
const fs = require('node:fs');
const path = require('node:path');

const { threadId } = require('node:worker_threads');

function writeJSONAtomic(file, value) {
  // pid and thread: Vitest's threads pool runs two test files in one
  // process, and both publish runner.json.
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${threadId}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(value) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

// waitFile resolves once file exists. The test's timeout bounds the wait.
function waitFile(file) {
  return new Promise((resolve, reject) => {
    let watcher = null;
    const check = () => {
      if (!fs.existsSync(file)) return;
      if (watcher) watcher.close();
      watcher = null;
      resolve();
    };
    watcher = fs.watch(path.dirname(file), check);
    watcher.on('error', reject);
    check();
  });
}

module.exports = { writeJSONAtomic, waitFile };

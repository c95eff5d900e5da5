'use strict';
// A reporter used only when a Go test drives the run (OJ_PW_SYNC): when the
// file "crash-runner" appears in that directory, the runner process throws
// an uncaught error, as a crashing runner would, in the middle of the run.
// ownerjournal's safety net must then recover the run on the way out.
const fs = require('node:fs');
const path = require('node:path');

class SyncReporter {
  onBegin() {
    const dir = process.env.OJ_PW_SYNC;
    if (!dir) return;
    const file = path.join(dir, 'crash-runner');
    const check = () => {
      if (!fs.existsSync(file)) return;
      this.watcher.close();
      setImmediate(() => {
        throw new Error('simulated crash of the Playwright runner');
      });
    };
    this.watcher = fs.watch(dir, check);
    this.watcher.unref();
    check();
  }

  onEnd() {
    if (this.watcher) this.watcher.close();
  }

  printsToStdio() {
    return false;
  }
}

module.exports = SyncReporter;

// treekill.js PID: the npm tree-kill baseline of bench's tree-kill-ratio.
// It prints "ready" once tree-kill is loaded, waits for one line on stdin,
// then calls treeKill(PID, 'SIGTERM') and prints one JSON line when tree-kill
// calls back: {"ms": time from the go line to the callback, "err": ...}.
// The driver times the members' exits itself, through pidfds.
'use strict';
const treeKill = require('tree-kill');

const pid = Number.parseInt(process.argv[2], 10);
if (!Number.isInteger(pid) || pid <= 0) {
  process.stderr.write('usage: node treekill.js PID\n');
  process.exit(2);
}
process.stdin.once('data', () => {
  const t0 = process.hrtime.bigint();
  treeKill(pid, 'SIGTERM', (err) => {
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    process.stdout.write(JSON.stringify({ ms, err: err ? String(err) : null }) + '\n');
    process.stdin.pause();
  });
});
process.stdout.write('ready\n');

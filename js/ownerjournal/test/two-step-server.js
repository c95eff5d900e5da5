'use strict';
// A naive server: it writes its ready file in two steps, straight into the
// final name. Usage: node two-step-server.js GOFILE|never --ready-file F.
// After the first step it waits (inotify, no polling) until GOFILE exists,
// then completes the JSON; with "never" it never does.
const fs = require('fs');
const http = require('http');
const path = require('path');

const [goFile, flag, readyFile] = process.argv.slice(2);
if (flag !== '--ready-file' || !readyFile) {
  console.error('usage: two-step-server.js GOFILE|never --ready-file F');
  process.exit(2);
}
const server = http.createServer((req, res) => res.end('ok\n'));
server.listen(0, '127.0.0.1', () => {
  const addr = `127.0.0.1:${server.address().port}`;
  fs.writeFileSync(readyFile, `{"pid": ${process.pid}, `);
  if (goFile === 'never') return;
  const finish = () => {
    if (!fs.existsSync(goFile)) return false;
    fs.appendFileSync(readyFile, `"addr": "${addr}"}`);
    return true;
  };
  const w = fs.watch(path.dirname(goFile), () => { if (finish()) w.close(); });
  if (finish()) w.close();
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));

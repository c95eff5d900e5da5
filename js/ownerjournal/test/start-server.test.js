'use strict';
// node --test: startServer against a server that writes its ready file in
// two steps. Needs OWNERJOURNAL_ROOT (a root) and the ownerjournal binary
// (OWNERJOURNAL_BIN or PATH); e2e/node_linux_test.go provides both.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const ownerjournal = require('..');

const server = path.join(__dirname, 'two-step-server.js');

test('startServer waits until a two-step ready file is complete JSON', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ojnode'));
  const goFile = path.join(tmp, 'go');
  // Observe the helper's reads (they still read the real file): once it
  // has read the half-written file, let the server complete it. So the
  // test proves that a partial read is waited out, whatever the timing.
  const realRead = fs.readFileSync;
  let partialReads = 0;
  fs.readFileSync = function (file, ...rest) {
    const text = realRead.call(this, file, ...rest);
    if (String(file).endsWith('ready.json') && !String(text).includes('addr')) {
      partialReads++;
      fs.writeFileSync(goFile, '');
    }
    return text;
  };
  let srv;
  try {
    srv = await ownerjournal.startServer(process.execPath, [server, goFile], { label: 'two-step', timeout: 60_000 });
  } finally {
    fs.readFileSync = realRead;
  }
  try {
    assert.ok(partialReads >= 1, 'the helper read the half-written file');
    assert.match(srv.addr, /^127\.0\.0\.1:\d+$/);
    assert.strictEqual(typeof srv.serverPid, 'number');
    const res = await fetch(srv.url);
    assert.strictEqual(await res.text(), 'ok\n');
  } finally {
    await srv.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('startServer names the file and its last content when the ready file never completes', async () => {
  await assert.rejects(
    ownerjournal.startServer(process.execPath, [server, 'never'], { label: 'half', timeout: 2_000 }),
    (err) => {
      assert.match(err.message, /^ownerjournal: ready file \/\S+\/ready\.json is not complete JSON after 2000 ms; last content: "\{\\"pid\\": \d+, "$/);
      return true;
    });
});

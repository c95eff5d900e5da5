'use strict';
// lock-local.js LOCK...: removes the `integrity` of every package a lock
// file resolves to a local tarball (`file:...tgz`), such as the ownerjournal
// tarballs of `make npm`. Those tarballs are rebuilt whenever the source
// changes, and npm installs a package whose lock entry has an integrity
// from its cache by that integrity: `npm ci` would install the binary of an
// older build without a word. Without it, npm reads the tarball itself.
// `make npm-lock` runs it after `npm install`; e2e's TestMain checks it.
const fs = require('node:fs');

for (const file of process.argv.slice(2)) {
  const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
  let n = 0;
  for (const entry of Object.values(lock.packages || {})) {
    if (typeof entry.resolved === 'string' && entry.resolved.startsWith('file:') && entry.integrity) {
      delete entry.integrity;
      n++;
    }
  }
  fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
  console.log(`${file}: ${n} local tarball integrity field(s) removed`);
}

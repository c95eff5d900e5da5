'use strict';
// pack-npm.js OUT: the body of `make npm`. Cross-compiles the ownerjournal
// CLI (CGO_ENABLED=0) for every platform of ownerjournal/platform.js and
// writes installable tarballs to OUT with `npm pack`:
//
//   ownerjournal-VERSION.tgz               the helper and its `bin`, with one
//                                          optional dependency per platform
//   ownerjournal-OS-CPU-VERSION.tgz        @ownerjournal/OS-CPU: the binary,
//                                          with `os` and `cpu` set so that npm
//                                          installs only the one that fits
//
// VERSION is read from one place, ownerjournal/package.json; it is stamped
// into every platform package, into the main package's optional
// dependencies (exact versions: helper and binary always match), and into
// the binary as -X main.version (the linker ignores -X for a variable the
// package does not declare).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { PLATFORMS, BIN_SUBPATH, packageName } = require('./ownerjournal/platform.js');

const GO = process.env.GO || 'go';
const repo = path.resolve(__dirname, '..');
const src = path.join(__dirname, 'ownerjournal');
const main = JSON.parse(fs.readFileSync(path.join(src, 'package.json'), 'utf8'));
const version = main.version;

const out = path.resolve(process.argv[2] || path.join(repo, 'dist', 'npm'));
const stage = path.join(out, '.stage');
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(stage, { recursive: true });

function writeJSON(file, v) {
  fs.writeFileSync(file, JSON.stringify(v, null, 2) + '\n');
}

function pack(dir) {
  const [info] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  }));
  const size = fs.statSync(path.join(out, info.filename)).size;
  console.log(`npm: ${path.relative(repo, path.join(out, info.filename))}: ${size} bytes (${info.entryCount} files, ${info.unpackedSize} bytes unpacked)`);
  return info.filename;
}

const optional = {};
for (const [platform, t] of Object.entries(PLATFORMS)) {
  const name = packageName(platform);
  const dir = path.join(stage, platform);
  const bin = path.join(dir, BIN_SUBPATH);
  execFileSync(GO, ['build', '-trimpath', '-ldflags', `-s -w -X main.version=${version}`, '-o', bin, './cmd/ownerjournal'], {
    cwd: repo, stdio: 'inherit', env: { ...process.env, CGO_ENABLED: '0', GOOS: t.goos, GOARCH: t.goarch },
  });
  fs.chmodSync(bin, 0o755);
  writeJSON(path.join(dir, 'package.json'), {
    name,
    version,
    description: `The ownerjournal binary for ${platform}; installed by the ownerjournal package as an optional dependency.`,
    license: main.license,
    os: [t.os],
    cpu: [t.cpu],
    files: [BIN_SUBPATH],
    preferUnplugged: true,
  });
  pack(dir);
  optional[name] = version;
}

const dir = path.join(stage, 'ownerjournal');
for (const f of main.files) {
  fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
  fs.copyFileSync(path.join(src, f), path.join(dir, f));
}
writeJSON(path.join(dir, 'package.json'), { ...main, optionalDependencies: optional });
pack(dir);
fs.rmSync(stage, { recursive: true, force: true });

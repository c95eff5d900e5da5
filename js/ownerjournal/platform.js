'use strict';
/**
 * The platforms ownerjournal ships a binary for, and where the helper finds
 * that binary. Shared by the helper (index.js), its `bin` (bin/ownerjournal.js)
 * and the packaging script (js/pack-npm.js), so that the package names exist
 * in one place.
 *
 * As esbuild does: the main package `ownerjournal` lists one package per
 * platform, `@ownerjournal/OS-CPU`, as an optional dependency; each of those
 * declares its `os` and `cpu`, so npm installs only the one that fits and no
 * install step downloads anything.
 */
const fs = require('node:fs');
const path = require('node:path');

/** PLATFORMS maps `${process.platform}-${process.arch}` to the Go target. */
const PLATFORMS = Object.freeze({
  'linux-x64': { goos: 'linux', goarch: 'amd64', os: 'linux', cpu: 'x64' },
  'linux-arm64': { goos: 'linux', goarch: 'arm64', os: 'linux', cpu: 'arm64' },
  'darwin-x64': { goos: 'darwin', goarch: 'amd64', os: 'darwin', cpu: 'x64' },
  'darwin-arm64': { goos: 'darwin', goarch: 'arm64', os: 'darwin', cpu: 'arm64' },
});

/** The binary's path inside a platform package. */
const BIN_SUBPATH = 'bin/ownerjournal';

/** ENV_BIN names the ownerjournal binary when no platform package fits. */
const ENV_BIN = 'OWNERJOURNAL_BIN';

function packageName(platform) {
  return `@ownerjournal/${platform}`;
}

function currentPlatform() {
  return `${process.platform}-${process.arch}`;
}

/** This file's own `bin` script, which a PATH lookup must never return. */
const SELF_BIN = path.join(__dirname, 'bin', 'ownerjournal.js');

function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function realpath(file) {
  try {
    return fs.realpathSync(file);
  } catch {
    return file;
  }
}

/** onPath returns the first executable `ownerjournal` on PATH that is not this package's own bin script. */
function onPath(env) {
  const self = realpath(SELF_BIN);
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    const file = path.join(dir, 'ownerjournal');
    if (executable(file) && realpath(file) !== self) return file;
  }
  return null;
}

/**
 * findBinary returns {path, source} for the ownerjournal binary: the one in
 * this platform's package (require.resolve from this package, so the
 * project's own install decides), else $OWNERJOURNAL_BIN, else the first
 * `ownerjournal` on PATH. When none fits it throws an Error that names the
 * platform package that is missing (or says that this platform has none).
 */
function findBinary({ env = process.env, platform = currentPlatform(), resolve = require.resolve } = {}) {
  const known = Object.prototype.hasOwnProperty.call(PLATFORMS, platform);
  let missing = '';
  if (known) {
    const pkg = packageName(platform);
    try {
      return { path: resolve(`${pkg}/${BIN_SUBPATH}`), source: pkg };
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err;
      missing = `the platform package ${pkg} is not installed (npm skips optional dependencies with --omit=optional ` +
        `or --no-optional; install ${pkg} with the same version as ownerjournal)`;
    }
  } else {
    missing = `there is no ownerjournal platform package for ${platform} (packages exist for ${Object.keys(PLATFORMS).join(', ')})`;
  }
  if (env[ENV_BIN]) return { path: env[ENV_BIN], source: ENV_BIN };
  const p = onPath(env);
  if (p) return { path: p, source: 'PATH' };
  const err = new Error(`ownerjournal: no ownerjournal binary: ${missing}; ${ENV_BIN} is not set; and no ownerjournal is on PATH`);
  err.code = 'OWNERJOURNAL_NO_BINARY';
  throw err;
}

module.exports = { PLATFORMS, BIN_SUBPATH, ENV_BIN, packageName, currentPlatform, findBinary };

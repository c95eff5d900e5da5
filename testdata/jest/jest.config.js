// The ownerjournal end-to-end Jest project (see package.json). The first
// two lines are all a project needs; the rest serves the Go tests in e2e/.
module.exports = {
  globalSetup: 'ownerjournal/global-setup',
  globalTeardown: 'ownerjournal/global-teardown',
  roots: ['<rootDir>/tests'],
  maxWorkers: 2,
  testTimeout: 60_000,
  transform: {},
  // A fresh cache per driven run: with timings of earlier fast runs cached,
  // Jest would run both files in band, in one process, and there would be
  // no worker to kill.
  ...(process.env.OJ_PW_SYNC ? { cacheDirectory: `${process.env.OJ_PW_SYNC}/jest-cache` } : {}),
};

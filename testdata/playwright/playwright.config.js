// @ts-check
// The ownerjournal end-to-end project: two workers, each owning an
// e2e-server through `ownerjournal run`, creating tmux sessions over HTTP
// with Playwright's `request` fixture. No browser is used.
const { defineConfig } = require('@playwright/test');
const ownerjournal = require('ownerjournal');

module.exports = defineConfig({
  testDir: './tests',
  workers: 2,
  retries: 0,
  // The hold tests wait for the Go test to release them.
  timeout: 60_000,
  outputDir: process.env.OJ_PW_OUTPUT || 'test-results',
  // Under a Go test (OJ_PW_SYNC): a JSON report to assert on, and a
  // reporter that can crash the runner on request.
  reporter: process.env.OJ_PW_SYNC
    ? [['list'], ['json', { outputFile: process.env.OJ_PW_REPORT }], [require.resolve('./sync-reporter.js')]]
    : 'list',
  // Global setups run in order, teardowns too: build (or take) the
  // binaries before the ownerjournal root exists; mark the start of
  // teardown before ownerjournal recovers the run.
  globalSetup: [require.resolve('./global-setup.js'), ownerjournal.globalSetup],
  globalTeardown: [require.resolve('./global-teardown.js'), ownerjournal.globalTeardown],
});

'use strict';
// Vitest globalSetup: name this module in vitest.config.mjs,
//
//   globalSetup: [require.resolve('ownerjournal/vitest')]
//
// setup() creates the run's private root and exports it as
// OWNERJOURNAL_ROOT before Vitest starts its workers (forks and threads
// alike inherit it), and recovers stale roots of dead runs; teardown() runs
// `ownerjournal recover --all --json` on the root synchronously and throws
// (failing the run) when something was retained. See index.js for the
// guarantees.
const ownerjournal = require('./index.js');

async function setup() {
  await ownerjournal.setup();
}

async function teardown() {
  ownerjournal.teardown();
}

// Vitest imports a CommonJS module with its module.exports as the default
// export, and a default export wins over named ones: so the module is a
// function too, which sets up and returns the teardown (Vitest's other
// globalSetup form); setup and teardown stay available by name.
module.exports = async function ownerjournalVitestGlobalSetup() {
  await setup();
  return teardown;
};
module.exports.setup = setup;
module.exports.teardown = teardown;

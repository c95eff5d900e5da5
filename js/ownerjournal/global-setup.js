'use strict';
// globalSetup of Playwright and Jest (`globalSetup: 'ownerjournal/global-setup'`):
// create the run's private root, export it as
// OWNERJOURNAL_ROOT for the workers, recover stale roots of dead runs.
// See index.js (setup) for the guarantees.
module.exports = async function ownerjournalGlobalSetup() {
  await require('./index.js').setup();
};

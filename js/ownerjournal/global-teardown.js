'use strict';
// globalTeardown of Playwright and Jest
// (`globalTeardown: 'ownerjournal/global-teardown'`): `ownerjournal recover --all --json` on the
// run's root, synchronously; one summary line; throws (failing the run)
// when the exit status is 3. See index.js (teardown) for the guarantees.
module.exports = async function ownerjournalGlobalTeardown() {
  require('./index.js').teardown();
};

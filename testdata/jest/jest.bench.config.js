// `make bench` (jest-overhead, bench/cmd/benchdriver): the same trivial
// Jest run with the ownerjournal helper (OJ_BENCH_HELPER=true) and without.
module.exports = {
  roots: ['<rootDir>/bench'],
  maxWorkers: 2,
  transform: {},
  ...(process.env.OJ_BENCH_HELPER === 'true'
    ? { globalSetup: 'ownerjournal/global-setup', globalTeardown: 'ownerjournal/global-teardown' }
    : {}),
};

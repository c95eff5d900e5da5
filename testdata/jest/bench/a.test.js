'use strict';
// A trivial test file: jest-overhead measures the helper's cost on a run,
// not the tests' (see jest.bench.config.js).
test('a: arithmetic', () => {
  expect(1 + 1).toBe(2);
});

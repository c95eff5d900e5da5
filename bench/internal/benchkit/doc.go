// Package benchkit holds what the benchmarks in bench/ and the driver
// bench/cmd/benchdriver share: short private roots, realistic records written
// fast (without fsync) for scan and recovery fixtures, real sleeper
// processes, and the floors the figures are divided by: the least work the
// same operation needs without ownerjournal (renameio.WriteFile plus a
// directory fsync; reading the same files; unlinking them).
//
// It is Linux-only; the package is empty elsewhere.
package benchkit

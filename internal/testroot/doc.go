// Package testroot holds the test helpers shared by the owner and journal
// tests: short private directories, a second real user, re-executed child
// processes dispatched from TestMain, and readiness files waited for with
// inotify and a pidfd instead of sleeps.
//
// The helpers are Linux-only (inotify, pidfd_open); the package is empty
// elsewhere. A missing prerequisite (useradd, the test user) fails the
// test, it never skips it.
package testroot

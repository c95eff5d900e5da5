// Package testguard gives a Go test binary that creates resources which can
// outlive it (tmux servers, daemons, sockets, scratch directories) the same
// guarantee a server gets from the creation gate: a signal never lands
// between the creation of a resource and its record, and everything recorded
// is ended before the binary exits.
//
// A package's TestMain hands the tests to [Main]:
//
//	func TestMain(m *testing.M) { os.Exit(testguard.Main(m, testguard.Options{})) }
//
// A test that creates a resource does so inside an admission, publishing a
// record before the resource exists and updating it after:
//
//	adm, err := testguard.Admit(ctx)
//	require.NoError(t, err)
//	defer adm.Done()
//	rec := &journal.Record{Kind: journal.KindTmux, Sockets: []string{"t-1"}, Phase: journal.PhaseIntent}
//	require.NoError(t, adm.Publish(rec))
//	... create it (the socket lives in testguard.Root().Path()) ...
//	rec.Subject, rec.Phase = &id, journal.PhaseLive
//	require.NoError(t, adm.Publish(rec))
//
// Guarantees:
//   - On the first SIGINT, SIGTERM or SIGHUP, new admissions fail (an error
//     wrapping [journal.ErrClosing]) at once; admitted creators are awaited,
//     up to [Options.Wait]; only then is the root replayed with
//     [recover.Run] and [recover.Options.All] (everything recorded is ended,
//     and the root is removed), and Main returns 128+n while the tests may
//     still be running. A test can therefore never create a resource after
//     cleanup has started (the flaw of a cleanup that runs concurrently with
//     the tests).
//   - Further signals never cut the cleanup short; it runs once.
//   - When the tests finish without a signal, the same cleanup ends what they
//     left recorded, and Main returns the tests' status (1 if they passed but
//     something could not be ended).
//   - The binary holds a lease on its root for its whole life, so a recoverer
//     that finds the root after a SIGKILL knows the binary is dead, whatever
//     happened to its PID.
//
// Caveats: a creator that is still admitted when [Options.Wait] has passed
// keeps the root from being replayed (its creation could land after the
// scan); Main then returns 128+n leaving the root, with its records, to
// recovery (`ownerjournal recover --root DIR --all`), and says so on the
// log. A SIGKILL, a crash or a test that calls os.Exit skips the cleanup the
// same way. Resources that are not recorded are not ended.
//
// Main must be called at most once at a time; the package-level functions
// are safe for concurrent use by the tests.
package testguard

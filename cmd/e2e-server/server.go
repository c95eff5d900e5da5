package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// admitTimeout bounds the wait for the root's shared lock (a teardown by
// another participant holds it exclusively while it scans).
const admitTimeout = 10 * time.Second

// server is the e2e server's state. Lock order: life, then mu, then a
// generation's mu.
type server struct {
	cfg  config
	log  *log.Logger
	st   *stages
	root *journal.Root
	self owner.Identity
	http *http.Server

	// life serializes reset and shutdown.
	life sync.Mutex

	mu       sync.Mutex
	cur      *generation // nil while a reset or the shutdown runs
	stopping bool
	genN     int

	// bg counts old generations whose destruction waits for their last
	// handler or creator (a reset whose drain timed out).
	bg sync.WaitGroup
}

// session is one private tmux server.
type session struct {
	id       string // its record's id
	sockName string // root-relative
	sockPath string
	gen      int

	// Set by the creator before it clears creating (under the
	// generation's mu); read only by whoever took the session out of its
	// generation.
	creating  bool
	subject   owner.Identity
	group     bool
	proc      *owner.Process // verified handle on the tmux server
	pane      *owner.Process // verified handle on its pane's process
	paneGroup bool
	paneRec   string // the pane's record, once published
}

func newServer(cfg config, logger *log.Logger, st *stages) (*server, error) {
	root, err := openRoot(cfg.root)
	if err != nil {
		return nil, err
	}
	self, err := owner.Self()
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &server{cfg: cfg, log: logger, st: st, root: root, self: self}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sessions", s.withGen(s.handleCreate))
	mux.HandleFunc("GET /sessions", s.withGen(s.handleList))
	mux.HandleFunc("DELETE /sessions/{id}", s.withGen(s.handleDelete))
	mux.HandleFunc("PUT /scratch/{name}", s.withGen(s.handleScratch))
	mux.HandleFunc("GET /healthz", s.withGen(s.handleHealth))
	// Reset is not counted among the handlers of the generation it ends:
	// it waits for them.
	mux.HandleFunc("POST /reset", s.handleReset)
	s.http = newHTTPServer(mux, logger)
	return s, nil
}

// start recovers orphans left in the root by dead participants (the daemon
// start-up step: never what a live participant owns; the root is kept) and
// makes the first generation of state.
func (s *server) start() error {
	ctx := context.Background()
	rep, err := recover.Run(ctx, s.root, recover.Options{KeepRoot: true, Grace: s.cfg.grace, Tmux: s.cfg.tmux, Log: s.log.Writer()})
	if err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	if !rep.Clean() {
		s.log.Printf("start-up recovery retained %d item(s) in %s", rep.Retained, s.root.Path())
	}
	g, err := s.newGeneration(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cur = g
	s.mu.Unlock()
	return nil
}

func (s *server) socketPath(name string) string { return filepath.Join(s.root.Path(), name) }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// withGen runs h as a handler of the current generation, which is not
// destroyed before h returns. While a reset or the shutdown runs there is
// no current generation and the answer is 503.
func (s *server) withGen(h func(http.ResponseWriter, *http.Request, *generation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		g := s.cur
		ok := g != nil && g.enterHandler()
		s.mu.Unlock()
		if !ok {
			httpError(w, http.StatusServiceUnavailable, "e2e-server is stopping or resetting")
			return
		}
		defer g.leaveHandler()
		h(w, r, g)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, a...)})
}

// sessionInfo is a session as the API shows it.
type sessionInfo struct {
	ID         string `json:"id"`
	Socket     string `json:"socket"`
	SocketName string `json:"socket_name"`
	PID        int    `json:"pid"`
	StartTime  uint64 `json:"start_time"`
	PanePID    int    `json:"pane_pid"`
	Generation int    `json:"generation"`
}

func (sess *session) info() sessionInfo {
	si := sessionInfo{ID: sess.id, Socket: sess.sockPath, SocketName: sess.sockName, PID: sess.subject.PID, StartTime: sess.subject.StartTime, Generation: sess.gen}
	if sess.pane != nil {
		si.PanePID = sess.pane.Identity().PID
	}
	return si
}

// POST /sessions, body (optional): {"command": "shell command for the pane"}.
func (s *server) handleCreate(w http.ResponseWriter, r *http.Request, g *generation) {
	var req struct {
		Command string `json:"command"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		httpError(w, http.StatusBadRequest, "read body: %v", err)
		return
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			httpError(w, http.StatusBadRequest, "body: %v", err)
			return
		}
	}
	// A missing or non-executable tmux is an error that names tmux, never
	// a fake session.
	bin, err := s.tmuxBinary()
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	// The server's own gate first: once shutdown or reset has closed it,
	// no tmux server is created by this generation.
	if !g.enterCreator() {
		httpError(w, http.StatusServiceUnavailable, "e2e-server is not admitting creators: stopping or resetting")
		return
	}
	sess, status, err := s.createInGate(r.Context(), g, bin, req.Command)
	g.leaveCreator()
	if err != nil {
		httpError(w, status, "%v", err)
		return
	}
	s.st.at(stageInHandler)
	writeJSON(w, http.StatusCreated, sess.info())
}

// createInGate takes the root's admission and creates one tmux server
// inside it. The work is not cancelled when the client goes away: a creation
// runs to a recorded end.
func (s *server) createInGate(rctx context.Context, g *generation, bin, command string) (*session, int, error) {
	actx, cancel := context.WithTimeout(rctx, admitTimeout)
	adm, err := s.root.Admit(actx)
	cancel()
	if err != nil {
		if errors.Is(err, journal.ErrClosing) {
			return nil, http.StatusServiceUnavailable, err
		}
		return nil, http.StatusInternalServerError, err
	}
	defer adm.Done()
	sess, err := s.create(context.WithoutCancel(rctx), adm, g, bin, command)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	return sess, 0, nil
}

// create publishes the intent record, starts tmux, reads the tmux server's
// identity and publishes the live record.
func (s *server) create(ctx context.Context, adm *journal.Admission, g *generation, bin, command string) (*session, error) {
	s.st.at(stageBeforeIntent)
	name := "t-" + randHex(4)
	sess := &session{sockName: name, sockPath: s.socketPath(name), gen: g.n, creating: true}
	rec := &journal.Record{
		Kind:    journal.KindTmux,
		Label:   "e2e-server tmux " + name,
		Owner:   s.self,
		Sockets: []string{name},
		Phase:   journal.PhaseIntent,
	}
	if err := adm.Publish(rec); err != nil {
		return nil, fmt.Errorf("intent record: %w", err)
	}
	sess.id = rec.ID
	g.add(sess)
	s.st.at(stageAfterIntent)
	if err := newSession(ctx, bin, sess.sockPath, command); err != nil {
		return nil, s.abandon(ctx, g, sess, err)
	}
	s.st.at(stageAfterDaemonized)
	pid, panePID, err := serverPIDs(ctx, bin, sess.sockPath)
	if err != nil {
		return nil, s.abandon(ctx, g, sess, err)
	}
	id, err := owner.Of(pid)
	if err != nil {
		return nil, s.abandon(ctx, g, sess, fmt.Errorf("tmux server pid %d: %w", pid, err))
	}
	proc, err := owner.Open(id)
	if err != nil {
		return nil, s.abandon(ctx, g, sess, fmt.Errorf("tmux server pid %d: %w", pid, err))
	}
	// tmux daemonizes with setsid(2): the server leads its session and
	// process group, so the group is signalled through its pidfd.
	pg, err := owner.GroupOf(pid)
	group := err == nil && pg == pid
	// The pane's process leads a session of its own (tmux gives each pane
	// a terminal). It dies of the hangup when its server goes; it is
	// recorded too, so that recovery confirms that rather than assume it.
	var pane *owner.Process
	var paneID owner.Identity
	paneGroup := false
	if paneID, err = owner.Of(panePID); err == nil {
		if pane, err = owner.Open(paneID); err == nil {
			pg, err := owner.GroupOf(panePID)
			paneGroup = err == nil && pg == panePID
		}
	}
	g.mu.Lock()
	sess.subject, sess.group, sess.proc, sess.pane, sess.paneGroup = id, group, proc, pane, paneGroup
	g.mu.Unlock()
	live := *rec
	live.Subject = &id
	if group {
		live.PGID = id.PID
	}
	live.Phase = journal.PhaseLive
	if err := adm.Publish(&live); err != nil {
		return nil, s.abandon(ctx, g, sess, fmt.Errorf("live record: %w", err))
	}
	if pane != nil {
		prec := &journal.Record{Kind: journal.KindProcess, Label: "e2e-server tmux pane " + name, Subject: &paneID, Owner: s.self, Phase: journal.PhaseLive}
		if paneGroup {
			prec.PGID = paneID.PID
		}
		if err := adm.Publish(prec); err != nil {
			return nil, s.abandon(ctx, g, sess, fmt.Errorf("pane record: %w", err))
		}
		g.mu.Lock()
		sess.paneRec = prec.ID
		g.mu.Unlock()
	}
	g.finish(sess)
	return sess, nil
}

// abandon ends what a failed creation may have made. If that cannot be
// confirmed, the session stays in its generation (a later sweep retries)
// and its record stays in the journal (for recovery).
func (s *server) abandon(ctx context.Context, g *generation, sess *session, cause error) error {
	_, err := s.endSession(ctx, sess)
	if err != nil {
		g.finish(sess)
		s.log.Printf("session %s: creation failed and its end is unconfirmed: %v", sess.id, err)
		return fmt.Errorf("%w (and ending it: %v)", cause, err)
	}
	g.remove(sess)
	return cause
}

// GET /sessions
func (s *server) handleList(w http.ResponseWriter, r *http.Request, g *generation) {
	g.mu.Lock()
	list := []sessionInfo{}
	for _, sess := range g.sessions {
		if !sess.creating {
			list = append(list, sess.info())
		}
	}
	g.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	writeJSON(w, http.StatusOK, list)
}

// DELETE /sessions/{id}
func (s *server) handleDelete(w http.ResponseWriter, r *http.Request, g *generation) {
	id := r.PathValue("id")
	sess, err := g.take(id)
	if err != nil {
		code := http.StatusNotFound
		if errors.Is(err, errCreating) {
			code = http.StatusConflict
		}
		httpError(w, code, "session %s: %v", id, err)
		return
	}
	done, err := s.endSession(context.WithoutCancel(r.Context()), sess)
	if err != nil {
		g.putBack(sess)
		httpError(w, http.StatusInternalServerError, "session %s: %v (done: %v)", id, err, done)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "done": done})
}

var scratchName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// PUT /scratch/{name}: a handler that uses the generation's state (its
// scratch directory) after reading the request.
func (s *server) handleScratch(w http.ResponseWriter, r *http.Request, g *generation) {
	name := r.PathValue("name")
	if !scratchName.MatchString(name) {
		httpError(w, http.StatusBadRequest, "bad scratch name %q", name)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		httpError(w, http.StatusBadRequest, "read body: %v", err)
		return
	}
	s.st.at(stageScratch)
	if err := g.dir.WriteFile(name, body, 0o600); err != nil {
		httpError(w, http.StatusInternalServerError, "scratch: %v", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"generation": g.n, "path": filepath.Join(s.root.Path(), g.scratch, name)})
}

// GET /healthz
func (s *server) handleHealth(w http.ResponseWriter, r *http.Request, g *generation) {
	h := map[string]any{"ok": true, "pid": s.self.PID, "generation": g.n, "scratch": filepath.Join(s.root.Path(), g.scratch)}
	if bin, err := s.tmuxBinary(); err != nil {
		h["tmux_error"] = err.Error()
	} else {
		h["tmux"] = bin
	}
	writeJSON(w, http.StatusOK, h)
}

// POST /reset: stop admitting, wait for admitted creators, end tmux, drain
// this generation's handlers, destroy its state once they have finished (at
// once, or later in the background if draining timed out), and serve again
// with fresh state.
func (s *server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		httpError(w, http.StatusServiceUnavailable, "e2e-server is stopping")
		return
	}
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "e2e-server is stopping")
		return
	}
	g := s.cur
	s.cur = nil
	s.mu.Unlock()
	ctx := context.WithoutCancel(r.Context())
	res := map[string]any{}
	if g != nil {
		idle := g.closeCreators()
		s.st.at(stageGateClosed)
		creatorsDone := waitFor(idle, s.cfg.creatorWait)
		if !creatorsDone {
			s.log.Printf("reset: creators of generation %d still running after %v; their sessions are ended when they finish", g.n, s.cfg.creatorWait)
		}
		s.st.at(stageResetBeforeKill)
		ended, errs := s.endSessions(ctx, g, false)
		s.st.at(stageResetAfterKill)
		res["ended"] = ended
		if len(errs) > 0 {
			res["errors"] = errorStrings(errs)
		}
		handlersDone := waitFor(g.closeHandlers(), s.cfg.drain)
		if creatorsDone && handlersDone {
			if err := s.destroy(ctx, g); err != nil {
				res["errors"] = append(errorStrings(errs), err.Error())
			}
			res["old_state"] = "destroyed"
		} else {
			// Never destroy what a live handler or creator uses: the
			// old generation goes when the last of them has finished.
			s.log.Printf("reset: generation %d still has handlers or creators; destroying it when they finish", g.n)
			res["old_state"] = "destroyed when its last handler finishes"
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				<-g.creatorsIdle
				<-g.handlersIdle
				if err := s.destroy(ctx, g); err != nil {
					s.log.Printf("reset: generation %d: %v", g.n, err)
				}
			}()
		}
	}
	ng, err := s.newGeneration(ctx)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, "reset: new state: %v", err)
		return
	}
	s.mu.Lock()
	s.cur = ng
	s.mu.Unlock()
	res["generation"] = ng.n
	writeJSON(w, http.StatusOK, res)
}

func errorStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// waitFor reports whether ch was closed within d.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// shutdown is the guard's cleanup: it runs once, whatever signals follow.
// Order: close the gate → wait (bounded) for admitted creators → end tmux →
// drain handlers (bounded) → end what late creators made → destroy the state
// only if every handler has finished (else leave it, recorded, to recovery)
// → retire → release the root.
func (s *server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	// A reset in progress finishes first; no new one starts.
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	g := s.cur
	s.cur = nil
	s.mu.Unlock()

	var errs []error
	creatorsDone := true
	if g != nil {
		idle := g.closeCreators()
		s.st.at(stageGateClosed)
		creatorsDone = waitFor(idle, s.cfg.creatorWait)
		if !creatorsDone {
			s.log.Printf("shutdown: creators still running after %v", s.cfg.creatorWait)
		}
	}
	s.st.at(stageShutdownBeforeKill)
	if g != nil {
		_, e := s.endSessions(ctx, g, false)
		errs = append(errs, e...)
	}
	s.st.at(stageShutdownAfterKill)

	dctx, cancel := context.WithTimeout(ctx, s.cfg.drain)
	err := s.http.Shutdown(dctx)
	drained := err == nil
	if !drained {
		s.log.Printf("shutdown: draining handlers: %v", err)
	}
	// Old generations whose destruction waited for their handlers.
	bgDone := make(chan struct{})
	go func() { s.bg.Wait(); close(bgDone) }()
	select {
	case <-bgDone:
	case <-dctx.Done():
		drained = false
		s.log.Printf("shutdown: an earlier generation still has live handlers")
	}
	cancel()

	if g != nil {
		if isClosed(g.creatorsIdle) && isClosed(g.closeHandlers()) && drained {
			// Every creator and handler has finished: the final sweep
			// ends what a creator that finished late made, then the
			// state goes.
			if err := s.destroy(ctx, g); err != nil {
				errs = append(errs, err)
			}
		} else {
			err := fmt.Errorf("leaving state %s and its records in %s to recovery: handlers or creators still running", g.scratch, s.root.Path())
			s.log.Print(err)
			errs = append(errs, err)
		}
	}
	if drained {
		// Release the lease and the root's descriptors. When handlers
		// are still live they may use the root: leave it open, the
		// exit releases it.
		errs = append(errs, s.root.Close())
	}
	return errors.Join(errs...)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// endSessions takes the sessions of g out of it (those still being created
// too when all is set) and ends them in parallel. A session whose end cannot
// be confirmed is put back, and its record stays.
func (s *server) endSessions(ctx context.Context, g *generation, all bool) ([]string, []error) {
	list := g.takeAll(all)
	var (
		mu    sync.Mutex
		ended []string
		errs  []error
		wg    sync.WaitGroup
	)
	for _, sess := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.endSession(ctx, sess)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				g.putBack(sess)
				errs = append(errs, fmt.Errorf("session %s: %w", sess.id, err))
				return
			}
			ended = append(ended, sess.id)
		}()
	}
	wg.Wait()
	sort.Strings(ended)
	return ended, errs
}

// endSession ends one tmux server: `tmux kill-server` through its socket
// (scrubbed environment, bounded), then the exit is confirmed on the server's
// pidfd, escalating with recover.Terminate (SIGTERM, SIGKILL to its process
// group) when it does not come; its pane is confirmed gone the same way. Only
// then is the socket unlinked (if nothing answers on it) and the record
// retired. A PID is never signalled without a verified handle.
func (s *server) endSession(ctx context.Context, sess *session) ([]string, error) {
	var done []string
	asked := false // kill-server was delivered
	st, err := s.probeSocket(sess.sockName)
	if err != nil {
		return done, err
	}
	if st == sockAnswers {
		bin, berr := s.tmuxBinary()
		if sess.proc == nil && berr == nil {
			// A session whose creation did not get as far as its
			// identity: ask the server who it is, so that its exit can
			// be confirmed on a pidfd.
			if pid, _, err := serverPIDs(ctx, bin, sess.sockPath); err == nil {
				if id, err := owner.Of(pid); err == nil {
					if p, err := owner.Open(id); err == nil {
						pg, err := owner.GroupOf(pid)
						sess.subject, sess.proc, sess.group = id, p, err == nil && pg == pid
					}
				}
			}
		}
		switch {
		case berr != nil && sess.proc == nil:
			return done, fmt.Errorf("tmux server on %s answers but %w", sess.sockPath, berr)
		case berr != nil:
			s.log.Printf("session %s: %v; ending the tmux server by signal", sess.id, berr)
		default:
			if err := killServer(ctx, bin, sess.sockPath); err != nil {
				s.log.Printf("session %s: %v", sess.id, err)
			} else {
				done = append(done, "tmux kill-server")
				asked = true
			}
		}
	}
	for _, p := range []struct {
		what  string
		proc  *owner.Process
		group bool
	}{{"tmux server", sess.proc, sess.group}, {"pane", sess.pane, sess.paneGroup}} {
		if p.proc == nil {
			continue
		}
		if p.proc.Exited() {
			done = append(done, fmt.Sprintf("%s pid %d already exited", p.what, p.proc.Identity().PID))
			continue
		}
		// After kill-server, the server (and so its pane) exits on its
		// own: give it the grace period. Without it (the socket is gone
		// or tmux is missing) go straight to the signals.
		if asked {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.grace)
			err := p.proc.Wait(wctx)
			cancel()
			if err == nil {
				done = append(done, fmt.Sprintf("%s pid %d exited", p.what, p.proc.Identity().PID))
				continue
			}
		}
		msgs, err := recover.Terminate(ctx, p.proc, p.group, s.cfg.grace)
		done = append(done, msgs...)
		if err != nil {
			return done, fmt.Errorf("%s: %w", p.what, err)
		}
	}
	st, err = s.probeSocket(sess.sockName)
	switch {
	case err != nil:
		return done, err
	case st == sockAnswers:
		return done, fmt.Errorf("socket %s still answers", sess.sockPath)
	case st == sockSilent:
		if err := s.root.Dir().Remove(sess.sockName); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return done, fmt.Errorf("unlink socket: %w", err)
		}
		done = append(done, "unlinked socket "+sess.sockName)
	}
	for _, id := range []string{sess.paneRec, sess.id} {
		if id == "" {
			continue
		}
		if err := s.root.Retire(id); err != nil && !errors.Is(err, journal.ErrNotFound) {
			return done, err
		}
	}
	done = append(done, "retired")
	for _, p := range []*owner.Process{sess.proc, sess.pane} {
		if p != nil {
			p.Close()
		}
	}
	return done, nil
}

// newGeneration makes fresh state: a scratch directory inside the root,
// recorded before it is created.
func (s *server) newGeneration(ctx context.Context) (*generation, error) {
	actx, cancel := context.WithTimeout(ctx, admitTimeout)
	adm, err := s.root.Admit(actx)
	cancel()
	if err != nil {
		return nil, err
	}
	defer adm.Done()
	name := "s-" + randHex(4)
	rec := &journal.Record{Kind: journal.KindPath, Label: "e2e-server state", Owner: s.self, Paths: []string{name}, Phase: journal.PhaseIntent}
	if err := adm.Publish(rec); err != nil {
		return nil, fmt.Errorf("state record: %w", err)
	}
	fail := func(err error) (*generation, error) {
		s.root.Dir().RemoveAll(name)
		s.root.Retire(rec.ID)
		return nil, err
	}
	if err := s.root.Dir().Mkdir(name, 0o700); err != nil {
		return fail(fmt.Errorf("state directory: %w", err))
	}
	dir, err := s.root.Dir().OpenRoot(name)
	if err != nil {
		return fail(fmt.Errorf("state directory: %w", err))
	}
	rec.Phase = journal.PhaseLive
	if err := adm.Publish(rec); err != nil {
		dir.Close()
		return fail(fmt.Errorf("state record: %w", err))
	}
	s.mu.Lock()
	s.genN++
	n := s.genN
	s.mu.Unlock()
	return newGenerationState(n, name, rec.ID, dir), nil
}

// destroy ends every session left in g (the final sweep: what a creator
// that finished late made) and then removes g's state and retires its
// record. It must be called only once g's handlers and creators have all
// finished. If a session cannot be ended, the state and records stay for
// recovery.
func (s *server) destroy(ctx context.Context, g *generation) error {
	if _, errs := s.endSessions(ctx, g, true); len(errs) > 0 {
		return fmt.Errorf("keeping state %s for recovery: %w", g.scratch, errors.Join(errs...))
	}
	g.dir.Close()
	if err := s.root.Dir().RemoveAll(g.scratch); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove state %s: %w", g.scratch, err)
	}
	if err := s.root.Retire(g.recID); err != nil && !errors.Is(err, journal.ErrNotFound) {
		return err
	}
	return nil
}

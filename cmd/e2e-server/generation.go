package main

import (
	"errors"
	"os"
	"sync"
)

var (
	errNoSession = errors.New("no such session")
	errCreating  = errors.New("still being created")
)

// generation is one lifetime of the server's state, from start or a reset
// to the next reset or the shutdown. It counts its handlers and its
// creators, each behind a gate that closes once: a closed gate admits
// nobody, and its idle channel is closed when the last one inside leaves.
type generation struct {
	n       int
	scratch string   // root-relative scratch directory
	recID   string   // the scratch directory's record
	dir     *os.Root // the scratch directory, for handlers

	mu           sync.Mutex
	creators     int
	creatorsShut bool
	creatorsIdle chan struct{}
	handlers     int
	handlersShut bool
	handlersIdle chan struct{}
	sessions     map[string]*session
}

func newGenerationState(n int, scratch, recID string, dir *os.Root) *generation {
	return &generation{
		n: n, scratch: scratch, recID: recID, dir: dir,
		creatorsIdle: make(chan struct{}),
		handlersIdle: make(chan struct{}),
		sessions:     map[string]*session{},
	}
}

// enterHandler admits a handler unless the generation is ending.
func (g *generation) enterHandler() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handlersShut {
		return false
	}
	g.handlers++
	return true
}

func (g *generation) leaveHandler() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handlers--; g.handlers == 0 && g.handlersShut {
		close(g.handlersIdle)
	}
}

// closeHandlers admits no more handlers and returns a channel closed once
// the last admitted one has left. It is idempotent.
func (g *generation) closeHandlers() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.handlersShut {
		g.handlersShut = true
		if g.handlers == 0 {
			close(g.handlersIdle)
		}
	}
	return g.handlersIdle
}

// enterCreator admits a creator unless the gate is closed.
func (g *generation) enterCreator() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.creatorsShut {
		return false
	}
	g.creators++
	return true
}

func (g *generation) leaveCreator() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.creators--; g.creators == 0 && g.creatorsShut {
		close(g.creatorsIdle)
	}
}

// closeCreators closes the creation gate and returns a channel closed once
// the last admitted creator has left. It is idempotent.
func (g *generation) closeCreators() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.creatorsShut {
		g.creatorsShut = true
		if g.creators == 0 {
			close(g.creatorsIdle)
		}
	}
	return g.creatorsIdle
}

// add registers a session whose creation has begun (its intent record is
// published), so that no sweep can miss it.
func (g *generation) add(sess *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sessions[sess.id] = sess
}

// finish marks a session's creation as over (successful or not).
func (g *generation) finish(sess *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sess.creating = false
}

// remove forgets a session.
func (g *generation) remove(sess *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sessions[sess.id] == sess {
		delete(g.sessions, sess.id)
	}
}

// take removes a finished session from g, so that exactly one caller ends
// it.
func (g *generation) take(id string) (*session, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sess, ok := g.sessions[id]
	switch {
	case !ok:
		return nil, errNoSession
	case sess.creating:
		return nil, errCreating
	}
	delete(g.sessions, id)
	return sess, nil
}

// takeAll removes every finished session from g, and those still being
// created too when all is set (only once every creator has left, or when a
// creator's work is to be swept regardless).
func (g *generation) takeAll(all bool) []*session {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*session
	for id, sess := range g.sessions {
		if sess.creating && !all {
			continue
		}
		out = append(out, sess)
		delete(g.sessions, id)
	}
	return out
}

// putBack returns a session whose end could not be confirmed.
func (g *generation) putBack(sess *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sess.creating = false
	g.sessions[sess.id] = sess
}

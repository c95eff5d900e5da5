package reliability

import (
	_ "unsafe" // go:linkname
)

// The crash matrix stops participants at the marked points of the library
// through its unexported test seams (STYLE.md: "Test seams are unexported
// package variables"). This package is not the seams' own, so it reaches them
// with a pull linkname. The linker refuses such references only into the
// standard library; if a seam is renamed or removed, this package stops
// linking, loudly, instead of silently testing nothing.

// publishHook is journal.publishHook: called with "written", "renamed" and
// "synced" at each step of an atomic publish.
//
//go:linkname publishHook github.com/ownerjournal/ownerjournal/journal.publishHook
var publishHook func(step string)

// stageHook is recover.stageHook: called with "classified", "signalled",
// "retired" and "removing" at the marked points of recover.Run.
//
//go:linkname stageHook github.com/ownerjournal/ownerjournal/recover.stageHook
var stageHook func(stage string)

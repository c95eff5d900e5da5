package recover

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

// TestClassifierMemoizesOnlyDeadSubjects: one classification remembers a
// subject's verdict only once it is dead (death of an identity is final);
// a subject seen alive is checked again for the next record, so a subject
// that dies in between is seen dead, never believed alive from a memo.
func TestClassifierMemoizesOnlyDeadSubjects(t *testing.T) {
	r, _ := openRoot(t)
	c := newClassifier(r)
	s := startSleeper(t)
	require.Equal(t, owner.Alive, c.subjectVerdict(s.ID).State, "live subject")
	require.NotContains(t, c.dead, s.ID, "a live verdict is not remembered")
	s.Kill()
	v := c.subjectVerdict(s.ID)
	require.Equal(t, owner.Dead, v.State, "the same classifier sees the subject die: %s", v.Reason)
	require.Equal(t, v, c.dead[s.ID], "a dead verdict is remembered")
	require.Equal(t, v, c.subjectVerdict(s.ID))
}

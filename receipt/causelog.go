package receipt

import (
	"sync"
	"time"
)

// causeLog samples log lines by cause. Maintenance passes over receipts it
// cannot advance and counts them; when a cause repeats on every receipt of
// every pass (a store that keeps failing, a lease that cannot be
// confirmed), one line per cause per interval says so — with how many
// times it occurred since the last line — instead of one per receipt, or
// none. It tracks at most max causes (and causeOther): any further cause is
// counted under causeOther, so its memory is bounded whatever the errors say.
type causeLog struct {
	every time.Duration
	max   int

	mu     sync.Mutex
	causes map[string]*causeCount
}

// causeOther collects the causes beyond causeLog.max.
const causeOther = "other"

type causeCount struct {
	logged time.Time // when its last line was logged
	n      uint64    // occurrences since then, not yet logged
}

func newCauseLog(every time.Duration, max int) *causeLog {
	return &causeLog{every: every, max: max, causes: make(map[string]*causeCount)}
}

// note counts one occurrence of cause at now. ok says whether to log a
// line now: for a cause's first occurrence, and then at most once per
// every. The line stands for n occurrences (this one included) under the
// name as (cause, or causeOther).
func (l *causeLog) note(now time.Time, cause string) (as string, n uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, seen := l.causes[cause]
	if !seen && len(l.causes) >= l.max {
		cause = causeOther
		c, seen = l.causes[cause]
	}
	if !seen {
		l.causes[cause] = &causeCount{logged: now}
		return cause, 1, true
	}
	c.n++
	if now.Sub(c.logged) < l.every {
		return cause, 0, false
	}
	n, c.n, c.logged = c.n, 0, now
	return cause, n, true
}

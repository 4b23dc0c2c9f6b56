package etcdtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/idemdb/idem/internal/apitest"
)

// Sessions in the process chaos: one key in three is staged in an
// interactive session and committed under the key, over HTTP, through
// random nodes — so every step on a session another node holds is
// forwarded to its holder, across kills and partitions. Checked as the
// keyed batches are: every terminal answer is the first byte for byte,
// and the key's counter is 1 for a commit and 0 otherwise (a conflict, or
// 409 session_aborted: its holder died before the commit was requested,
// and it was presumed aborted).

func procSessionKey(key int) bool { return key%3 == 0 }

// procSession is the one session of a key, kept across its retries.
type procSession struct {
	mu     sync.Mutex
	id     string
	staged bool
}

func (pc *procChaos) session(key int) *procSession {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.sessions == nil {
		pc.sessions = map[int]*procSession{}
	}
	s := pc.sessions[key]
	if s == nil {
		s = &procSession{}
		pc.sessions[key] = s
	}
	return s
}

// sendSession moves key's session one step on through node — begin,
// stage, commit — and records the commit's terminal answer; it returns
// that answer, or "" if there was none.
func (pc *procChaos) sendSession(key, node int, wait string) string {
	s := pc.session(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := pc.client(node)
	if s.id == "" {
		r, err := c.Try("POST", "/v1/sessions", `{"ttl_seconds":60,"table":"`+pc.table(key)+`"}`)
		if err != nil || r.Status != 201 {
			return ""
		}
		var b struct {
			ID string `json:"session_id"`
		}
		if json.Unmarshal(r.Body, &b) != nil {
			return ""
		}
		s.id = b.ID
	}
	if !s.staged {
		// Whether an earlier stage whose answer was lost landed is the
		// session's to say: a batch staged twice would count twice.
		r, err := c.Try("GET", "/v1/sessions/"+s.id, nil)
		if err != nil || r.Status != 200 {
			return ""
		}
		var info struct {
			State  string `json:"state"`
			Stages int    `json:"stages"`
		}
		if json.Unmarshal(r.Body, &info) != nil {
			return ""
		}
		switch {
		case info.Stages > 0:
			s.staged = true
		case info.State == "open":
			body := `{"table":"` + pc.table(key) + `","transforms":[{"id":"ctr-` + fmt.Sprint(key) + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
			if r, err := c.Try("POST", "/v1/sessions/"+s.id+"/batch", body); err != nil || r.Status != 200 {
				return ""
			}
			s.staged = true
		}
	}
	headers := []string{"Idempotency-Key", fmt.Sprint(key)}
	if wait != "" {
		headers = append(headers, "Prefer", wait)
	}
	r, err := c.Try("POST", "/v1/sessions/"+s.id+"/commit", nil, headers...)
	if err != nil || apitest.TerminalOutcome(r) == "" && !sessionAborted(r) {
		return ""
	}
	a := fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
	pc.mu.Lock()
	pc.answers[key] = append(pc.answers[key], a)
	if r.Status == 201 {
		pc.sessionCommits++
	} else {
		pc.sessionAborts++
	}
	pc.mu.Unlock()
	return a
}

// sessionAborted reports whether r is 409 session_aborted: final, and
// nothing applied.
func sessionAborted(r *apitest.Response) bool {
	var p struct {
		Code string `json:"code"`
	}
	return r.Status == 409 && json.Unmarshal(r.Body, &p) == nil && p.Code == "session_aborted"
}

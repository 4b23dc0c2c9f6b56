package lease

// Status of a held lease.
type Status int

const (
	// Live: the last renewal or owner write confirmed the claim.
	Live Status = iota
	// Unconfirmed: the write that published the claim was ambiguous; the
	// claim's version must be read back (Resync) before it can fence.
	Unconfirmed
	// Uncertain: renewals kept failing until the confirmed expiry ran out.
	// A successor may have adopted; only CAS decides.
	Uncertain
	// Lost: a write was fenced. Another owner holds the receipt.
	Lost
	// Publishing: the write that publishes the claim (creation or
	// adoption) is in flight. Only that write's caller settles it
	// (Confirmed, Unconfirm, or removal from the active set); renewals
	// skip it, because reading the claim back before the write lands would
	// wrongly find it missing (or still the predecessor's) and drop a hold
	// that is about to become live.
	Publishing
)

func (s Status) String() string {
	return [...]string{"live", "unconfirmed", "uncertain", "lost", "publishing"}[s]
}

// event is what happened to a held lease: the one input of its status.
type event int

const (
	// published: the write that publishes the claim (creation,
	// adoption) is durable.
	published event = iota
	// publishAmbiguous: that write's outcome is unknown.
	publishAmbiguous
	// fenced: a write was fenced, a read-back found another claim or
	// none, or the receipt finished elsewhere.
	fenced
	// renewed: a write extended the lease.
	renewed
	// expiryRanOut: renewals kept failing until the confirmed expiry
	// passed.
	expiryRanOut
	// readBack: the store was read and holds exactly this claim.
	readBack
)

// after is the status machine of a held lease, the only place a status
// changes (held.go applies it under the hold's mutex):
//
//   - a durable publication makes any hold Live: its writer alone settles
//     a Publishing hold, and its version is the fencing token from then on;
//   - Lost is final for everything else: once fenced, only CAS could say
//     otherwise, and nothing reads it back to Live;
//   - an ambiguous publication leaves the hold Unconfirmed until a
//     read-back finds the claim (Live) or not (Lost);
//   - a renewal confirms the hold (Live); a running-out expiry makes only a
//     Live hold Uncertain (an unconfirmed or publishing one never was
//     confirmed to expire).
func (s Status) after(e event) Status {
	switch {
	case e == published:
		return Live
	case s == Lost, e == fenced:
		return Lost
	case e == publishAmbiguous:
		return Unconfirmed
	case e == renewed:
		return Live
	case e == expiryRanOut && s == Live:
		return Uncertain
	case e == readBack && s == Unconfirmed:
		return Live
	}
	return s
}

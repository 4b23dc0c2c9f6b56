package lease

import "testing"

// TestStatus_After is the lease status machine's whole table: every status
// against every event. The properties it encodes: a durable publication
// makes any hold Live; Lost is final for everything else; ambiguity leaves
// it Unconfirmed until a read-back; only a Live hold turns Uncertain.
func TestStatus_After(t *testing.T) {
	events := []event{published, publishAmbiguous, fenced, renewed, expiryRanOut, readBack}
	names := []string{"published", "publishAmbiguous", "fenced", "renewed", "expiryRanOut", "readBack"}
	want := map[Status][]Status{
		//            published, ambiguous,   fenced, renewed, expiry,    readBack
		Live:        {Live, Unconfirmed, Lost, Live, Uncertain, Live},
		Unconfirmed: {Live, Unconfirmed, Lost, Live, Unconfirmed, Live},
		Uncertain:   {Live, Unconfirmed, Lost, Live, Uncertain, Uncertain},
		Lost:        {Live, Lost, Lost, Lost, Lost, Lost},
		Publishing:  {Live, Unconfirmed, Lost, Live, Publishing, Publishing},
	}
	for s, row := range want {
		for i, e := range events {
			if got := s.after(e); got != row[i] {
				t.Errorf("%v after %s = %v, want %v", s, names[i], got, row[i])
			}
		}
	}
}

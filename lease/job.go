package lease

import (
	"context"
	"errors"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// A job lease gives one owner at a time a background job that is global to
// the store, such as the retention cleaner. Each pass renews it with a CAS
// and fences its own writes on the version it got, so a stale incarnation's
// pass cannot write.
func jobKey(name string) []byte { return store.NSLease.Key("job", name) }

type jobRecord struct {
	Node        string `cbor:"1,keyasint"`
	Incarnation uint64 `cbor:"2,keyasint"`
	Expires     int64  `cbor:"3,keyasint"` // unix ns
}

// JobKey is the key to fence a job's writes on.
func JobKey(name string) []byte { return jobKey(name) }

// AcquireJob takes or renews the job lease `name` for o until now+ttl. It
// returns ok=false while another live owner holds it. The returned version
// fences the pass's writes (AtVersion(JobKey(name), v)).
func AcquireJob(ctx context.Context, st store.Store, name string, o Owner, now time.Time, ttl time.Duration) (store.Version, bool, error) {
	b := new(store.Batch)
	it, err := st.Get(ctx, jobKey(name))
	switch {
	case errors.Is(err, store.ErrNotFound):
		b.Absent(jobKey(name))
	case err != nil:
		return 0, false, err
	default:
		var cur jobRecord
		if err := cbor.Unmarshal(it.Value, &cur); err != nil {
			return 0, false, store.RecordError(it.Key, "lease: job", err)
		}
		mine := cur.Node == o.Node && cur.Incarnation <= o.Incarnation
		if !mine && now.Before(time.Unix(0, cur.Expires)) {
			return 0, false, nil
		}
		b.AtVersion(jobKey(name), it.Version)
	}
	val, _ := cbor.Marshal(jobRecord{Node: o.Node, Incarnation: o.Incarnation, Expires: now.Add(ttl).UnixNano()})
	v, err := st.Apply(ctx, b.Put(jobKey(name), val))
	if errors.Is(err, store.ErrConditionFailed) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

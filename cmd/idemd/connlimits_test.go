package main

import (
	"strings"
	"testing"
)

// TestConnectionCaps_LeaveTheStoreItsDescriptors: the default cap keeps
// max(128, limit/8) descriptors from connections and is at most 4096; an
// explicit cap may not eat into the 128; a limit that leaves nothing is
// refused, not run into a fail-stop.
func TestConnectionCaps_LeaveTheStoreItsDescriptors(t *testing.T) {
	for _, c := range []struct {
		name             string
		conns, idle      int
		limit            uint64
		wantConns, wIdle int
		wantErr          string
	}{
		{"small limit", 0, 0, 256, 128, 32, ""},
		{"an eighth kept", 0, 0, 2048, 1792, 448, ""},
		{"default at most 4096", 0, 0, 1 << 20, 4096, 1024, ""},
		{"explicit past the default", 1500, 0, 2048, 1500, 375, ""},
		{"explicit into the reserve", 1000, 0, 1024, 0, 0, "-max-connections 1000: the open-files limit is 1024"},
		{"idle beyond the cap", 100, 200, 1024, 0, 0, "-max-idle-connections 200: must be at most -max-connections 100"},
		{"limit within the reserve", 0, 0, 100, 0, 0, "the open-files limit is 100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conns, idle, err := connectionCaps(c.conns, c.idle, c.limit)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || conns != c.wantConns || idle != c.wIdle {
				t.Fatalf("caps %d, %d, %v; want %d, %d", conns, idle, err, c.wantConns, c.wIdle)
			}
		})
	}
}

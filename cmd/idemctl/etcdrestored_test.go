package main

import (
	"strings"
	"testing"
	"time"
)

// TestEtcdRestored_RefusesWhatCannotBeAnEpochBeforeReachingEtcd: a
// missing or malformed flag is a usage error (exit 2) naming the flag, and
// no connection is tried (the endpoint given answers nothing).
func TestEtcdRestored_RefusesWhatCannotBeAnEpochBeforeReachingEtcd(t *testing.T) {
	const ep = "127.0.0.1:1"
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backup-time", past}, "-etcd-endpoints"},
		{[]string{"-etcd-endpoints", ep}, "-backup-time"},
		{[]string{"-etcd-endpoints", ep, "-backup-time", "yesterday"}, "RFC 3339"},
		{[]string{"-etcd-endpoints", ep, "-backup-time", "2026-12-05 04:00:00"}, "RFC 3339"},
		{[]string{"-etcd-endpoints", ep, "-backup-time", future}, "in the future"},
		{[]string{"-etcd-endpoints", ep, "-etcd-prefix", "/idem", "-backup-time", past}, "must end in '/'"},
		{[]string{"-etcd-endpoints", ep, "-backup-time", past, "extra"}, "no arguments"},
	} {
		code, out, errOut := idemctl(append([]string{"etcd-restored"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("etcd-restored %q: exit %d, stderr %q, stdout %q; want exit 2 naming %q", tc.args, code, errOut, out, tc.want)
		}
	}
}

// TestEtcdRestored_IsListedWithItsUsage: help lists the verb, and its
// usage says how to record a later restore and that nodes read the epoch
// only at start.
func TestEtcdRestored_IsListedWithItsUsage(t *testing.T) {
	if code, out, _ := idemctl("help"); code != exitOK || !strings.Contains(out, "etcd-restored") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	code, out, _ := idemctl("help", "etcd-restored")
	for _, want := range []string{"-force", "only at start", "-etcd-ca", "-etcd-password-file"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help etcd-restored: exit %d, no %q in\n%s", code, want, out)
		}
	}
}

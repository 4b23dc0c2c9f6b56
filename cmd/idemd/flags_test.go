package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/wal"
)

// TestParseFlags_RefusesEveryOutOfRangeValue: each flag outside its range
// is a usage error (exit 2) whose one-line message names the flag, the
// value and the rule.
func TestParseFlags_RefusesEveryOutOfRangeValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "8420"}, `-addr "8420": must be host:port`},
		{[]string{"-addr", "localhost:http"}, `-addr "localhost:http": the port must be a number 0..65535`},
		{[]string{"-addr", "127.0.0.1:65536"}, `-addr "127.0.0.1:65536": the port must be a number 0..65535`},
		{[]string{"-data", ""}, `-data "": must name a directory`},
		{[]string{"-node", ""}, `-node "": must be 1..64 bytes`},
		{[]string{"-node", strings.Repeat("n", 65)}, `must be 1..64 bytes`},
		{[]string{"-node", "a/b"}, `-node "a/b": must be visible ASCII characters other than '/'`},
		{[]string{"-node", "a b"}, `-node "a b": must be visible ASCII`},
		{[]string{"-lease-ttl", "0"}, "-lease-ttl 0s: must be at least 100ms"},
		{[]string{"-lease-ttl", "-1s"}, "-lease-ttl -1s: must be at least 100ms"},
		{[]string{"-renew-interval", "-1s"}, "-renew-interval -1s: must be 0 (lease-ttl/3) or at least 10ms"},
		{[]string{"-renew-interval", "1ns"}, "-renew-interval 1ns: must be 0 (lease-ttl/3) or at least 10ms"},
		{[]string{"-retention", "0"}, "-retention 0s: must be positive"},
		{[]string{"-data", "/srv/idem", "-backup-dir", "/srv/idem/backups"}, `-backup-dir "/srv/idem/backups": must not be -data "/srv/idem" or inside it`},
		{[]string{"-data", "/srv/idem", "-backup-dir", "/srv/idem"}, `-backup-dir "/srv/idem": must not be -data`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-backup-dir", "/b"}, `-backup-dir "/b": only with -store local`},
		{[]string{"-admins", "ops"}, `-admins "ops": needs -tokens`},
		{[]string{"-tombstone-retention", "-1s"}, "-tombstone-retention -1s: must be 0 (off) or longer than -retention 24h0m0s"},
		{[]string{"-tombstone-retention", "24h"}, "-tombstone-retention 24h0m0s: must be 0 (off) or longer than -retention 24h0m0s"},
		{[]string{"-legacy-table-owner", ""}, `-legacy-table-owner "": must be a principal`},
		{[]string{"-legacy-table-owner", "a:b"}, `-legacy-table-owner "a:b": must be a principal: non-empty, no ':'`},
		{[]string{"-legacy-table-owner", " a"}, `-legacy-table-owner " a": must be a principal`},
		{[]string{"-maintain-interval", "1ms"}, "-maintain-interval 1ms: must be 0 (default), negative (never) or at least 10ms"},
		{[]string{"-clean-interval", "1ns"}, "-clean-interval 1ns: must be 0 (default), negative (never) or at least 10ms"},
		{[]string{"-executor", "0"}, "-executor 0: must be at least 1"},
		{[]string{"-executor", "-3"}, "-executor -3: must be at least 1"},
		{[]string{"-wait-max", "0"}, "-wait-max 0s: must be positive"},
		{[]string{"-session-ttl-max", "1500ms"}, "-session-ttl-max 1.5s: must be whole seconds, at least 1s"},
		{[]string{"-session-ttl-max", "0"}, "-session-ttl-max 0s: must be whole seconds, at least 1s"},
		{[]string{"-sessions-max", "0"}, "-sessions-max 0: must be at least 1"},
		{[]string{"-principal-sessions-max", "-1"}, "-principal-sessions-max -1: must be 1..-sessions-max (4096), or 0 for the default"},
		{[]string{"-sessions-max", "8", "-principal-sessions-max", "9"}, "-principal-sessions-max 9: must be 1..-sessions-max (8), or 0 for the default"},
		{[]string{"-principal-inflight-max", "-1"}, "-principal-inflight-max -1: must be 1..-executor (256), or 0 for the default"},
		{[]string{"-executor", "4", "-principal-inflight-max", "5"}, "-principal-inflight-max 5: must be 1..-executor (4), or 0 for the default"},
		{[]string{"-max-body", "-1"}, "-max-body -1: must be at least 1 byte"},
		{[]string{"-max-body", "0"}, "-max-body 0: must be at least 1 byte"},
		{[]string{"-request-timeout", "0"}, "-request-timeout 0s: must be positive"},
		{[]string{"-header-timeout", "-1s"}, "-header-timeout -1s: must be positive"},
		{[]string{"-shutdown-timeout", "0"}, "-shutdown-timeout 0s: must be positive"},
		{[]string{"-body-timeout", "0"}, "-body-timeout 0s: must be positive"},
		{[]string{"-max-connections", "-1"}, "-max-connections -1, -max-idle-connections 0: must be 0 (default) or positive"},
		{[]string{"-max-idle-connections", "-1"}, "-max-connections 0, -max-idle-connections -1: must be 0 (default) or positive"},
		{[]string{"-checkpoint-bytes", "0"}, "-checkpoint-bytes 0: must be positive (bytes) or negative (disabled)"},
		{[]string{"-wal-segment-bytes", "0"}, "-wal-segment-bytes 0: must be at least 1"},
		{[]string{"-wal-group-linger", "-1us"}, "-wal-group-linger -1µs: must be 0 (never) to 10ms"},
		{[]string{"-wal-group-linger", "11ms"}, "-wal-group-linger 11ms: must be 0 (never) to 10ms"},
		{[]string{"-log-level", "verbose"}, `-log-level "verbose": must be debug, info, warn or error`},
		{[]string{"-log-format", "xml"}, `-log-format "xml": must be text or json`},
		{[]string{"-store", "s3"}, `-store "s3": must be local or etcd`},
		{[]string{"-etcd-endpoints", "127.0.0.1:2379"}, "-etcd-endpoints: only with -store etcd"},
		{[]string{"-advertise", "http://127.0.0.1:8420"}, "-advertise: only with -store etcd"},
		{[]string{"-store", "etcd", "-advertise", "http://127.0.0.1:8420"}, `-etcd-endpoints "": -store etcd needs 1..16 endpoints`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1", "-advertise", "http://127.0.0.1:8420"}, `-etcd-endpoints: "127.0.0.1" must be host:port`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-etcd-prefix", "/idem", "-advertise", "http://127.0.0.1:8420"}, `-etcd-prefix "/idem": must end in '/'`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-etcd-dial-timeout", "1ms", "-advertise", "http://127.0.0.1:8420"}, "-etcd-dial-timeout 1ms: must be at least 100ms"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379"}, `-advertise "": -store etcd needs the URL peers reach this node at`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "127.0.0.1:8420"}, `-advertise "127.0.0.1:8420": -store etcd needs the URL`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1"}, `-advertise "http://127.0.0.1": -store etcd needs the URL`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420/x"}, `-advertise "http://127.0.0.1:8420/x": -store etcd needs the URL`},
		{[]string{"-etcd-ca", "ca.crt"}, "-etcd-ca: only with -store etcd"},
		{[]string{"-cluster-secret-file", "secret"}, "-cluster-secret-file: only with -store etcd"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-cert", "c.crt"}, "-etcd-cert and -etcd-key: give both or neither"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-cert", "c.crt", "-etcd-key", "c.key"}, "a client certificate needs TLS: give -etcd-ca too"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-user", "root"}, "-etcd-user and -etcd-password-file: give both or neither"},
		{[]string{"-tls-cert", "node.crt"}, "-tls-cert and -tls-key: give both or neither"},
		{[]string{"-tls-key", "node.key"}, "-tls-cert and -tls-key: give both or neither"},
		{[]string{"-tls-client-ca", "ca.crt"}, "-tls-client-ca: mutual TLS needs TLS: give -tls-cert and -tls-key too"},
		{[]string{"-peer-ca", "ca.crt"}, "-peer-ca: only with -store etcd"},
		{[]string{"-etcd-high-water", "0.5"}, "-etcd-high-water: only with -store etcd"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-high-water", "0"}, "-etcd-high-water 0: must be a share of the quota in (0, 1]"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-high-water", "1.2"}, "-etcd-high-water 1.2: must be a share"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-quota-bytes", "-1"}, "-etcd-quota-bytes -1: must be 0"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-etcd-space-interval", "1ms"}, "-etcd-space-interval 1ms: must be at least 10ms"},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "http://127.0.0.1:8420", "-tls-cert", "n.crt", "-tls-key", "n.key"},
			`-advertise "http://127.0.0.1:8420": this node serves HTTPS (-tls-cert): advertise https://host:port`},
		{[]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "ftp://127.0.0.1:8420"}, `-advertise "ftp://127.0.0.1:8420": -store etcd needs the URL`},
		// What the flag package refuses is a usage error too.
		{[]string{"-executor", "many"}, `invalid value "many" for flag -executor`},
		{[]string{"-lease-ttl", "10"}, `invalid value "10" for flag -lease-ttl`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		// Anything after the flags.
		{[]string{"serve"}, `unexpected argument "serve": idemd takes flags only`},
		{[]string{"-executor", "4", "--", "-x"}, `unexpected argument "-x"`},
	} {
		_, err := parseFlags(c.args, io.Discard)
		var u *usageError
		if !errors.As(err, &u) || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v (exit %d), want a one-line usage error containing %q", c.args, err, exitCode(err), c.want)
		}
	}
}

// TestParseFlags_AcceptsTheDocumentedSpecialValues: the values the usage
// gives a meaning are accepted, and the defaults they stand for are what
// the config (and so the start-up log) holds.
func TestParseFlags_AcceptsTheDocumentedSpecialValues(t *testing.T) {
	c, err := parseFlags([]string{"-lease-ttl", "3s", "-renew-interval", "0", "-maintain-interval", "0",
		"-clean-interval", "0", "-checkpoint-bytes", "-1", "-addr", ":0", "-log-level", "DEBUG"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.renewInterval != time.Second || c.maintainEvery != 1500*time.Millisecond || c.cleanEvery != time.Minute ||
		c.checkpointBytes != -1 || c.logLevel != "debug" {
		t.Fatalf("effective %+v", c)
	}
	c, err = parseFlags([]string{"-store", "etcd", "-etcd-endpoints", " 10.0.0.1:2379, http://10.0.0.2:2379 ,", "-advertise", "http://10.0.0.7:8420"}, io.Discard)
	if err != nil || c.store != storeEtcd || len(c.etcdEndpoints) != 2 || c.etcdEndpoints[1] != "http://10.0.0.2:2379" ||
		c.etcdPrefix != "/idem/" || c.etcdDialTimeout != 5*time.Second || c.advertise != "http://10.0.0.7:8420" ||
		c.etcdQuota != 0 || c.etcdHighWater != 0.8 || c.etcdSpaceEvery != time.Second {
		t.Fatalf("-store etcd: %+v %v", c, err)
	}
	c, err = parseFlags([]string{"-lease-ttl", "3s", "-renew-interval", "2s", "-maintain-interval", "-1s", "-clean-interval", "-1ns"}, io.Discard)
	if err != nil || c.renewInterval != time.Second || c.maintainEvery >= 0 || c.cleanEvery >= 0 {
		t.Fatalf("renew-interval over lease-ttl/3, negative intervals: %+v %v", c, err)
	}
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{{"0", -1}, {"250us", 250 * time.Microsecond}} {
		c, err := parseFlags([]string{"-wal-group-linger", tc.arg}, io.Discard)
		if err != nil || walLinger(c.walLinger) != tc.want {
			t.Fatalf("-wal-group-linger %s: GroupLinger %v, want %v (%v)", tc.arg, walLinger(c.walLinger), tc.want, err)
		}
	}
	if c, _ := parseFlags(nil, io.Discard); c.walLinger != wal.DefaultGroupLinger {
		t.Fatalf("-wal-group-linger defaults to %v, want wal's %v", c.walLinger, wal.DefaultGroupLinger)
	}
	c, err = parseFlags([]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "https://127.0.0.1:8420",
		"-tls-cert", "n.crt", "-tls-key", "n.key", "-tls-client-ca", "ca.crt", "-peer-ca", "ca.crt"}, io.Discard)
	if err != nil || c.tlsCert != "n.crt" || c.tlsKey != "n.key" || c.tlsClientCA != "ca.crt" || c.peerCA != "ca.crt" || c.advertise != "https://127.0.0.1:8420" {
		t.Fatalf("HTTPS on etcd, mutual, with -peer-ca: %+v %v", c, err)
	}
	c, err = parseFlags([]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "https://proxy.example:443"}, io.Discard)
	if err != nil || c.tlsCert != "" {
		// A TLS-terminating proxy in front of a plain-HTTP node.
		t.Fatalf("an https -advertise without -tls-cert: %+v %v", c, err)
	}
	if _, err := parseFlags([]string{"-tls-cert", "n.crt", "-tls-key", "n.key", "-tls-client-ca", "ca.crt"}, io.Discard); err != nil {
		t.Fatalf("mutual TLS on the local store: %v", err)
	}
	if _, err := parseFlags([]string{"-addr", "[::1]:8420", "-node", "n-1#x.y"}, io.Discard); err != nil {
		t.Fatalf("IPv6 host, punctuation in node: %v", err)
	}
	// The quotas' 0 is a quarter of the node-wide limit it divides, at
	// least 1; a quota may be the whole limit.
	for _, tc := range []struct {
		args               []string
		sessions, inflight int
	}{
		{nil, 1024, 64},
		{[]string{"-sessions-max", "64", "-executor", "8"}, 16, 2},
		{[]string{"-sessions-max", "3", "-executor", "1"}, 1, 1},
		{[]string{"-principal-sessions-max", "4096", "-principal-inflight-max", "256"}, 4096, 256},
	} {
		c, err := parseFlags(tc.args, io.Discard)
		if err != nil || c.quotaSessions != tc.sessions || c.quotaInflight != tc.inflight {
			t.Fatalf("%q: quotas %d sessions, %d in flight, want %d, %d (%v)", tc.args, c.quotaSessions, c.quotaInflight, tc.sessions, tc.inflight, err)
		}
	}
}

// TestParseFlags_HelpNamesTheTokensFile: -h writes every flag, the tokens
// one as `-tokens FILE` with the line format in its description; it is
// flag.ErrHelp, exit 0 (as flag.ExitOnError does).
func TestParseFlags_HelpNamesTheTokensFile(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
		t.Fatalf("-h: %v (exit %d)", err, exitCode(err))
	}
	if !strings.Contains(out.String(), "-tokens FILE\n") || !strings.Contains(out.String(), "one principal:token per line") {
		t.Fatalf("-h output:\n%s", out.String())
	}
	for _, f := range []string{"-tls-cert FILE\n", "-tls-key FILE\n", "-tls-client-ca FILE\n", "-peer-ca FILE\n"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("-h does not list %q", f)
		}
	}
	for _, name := range []string{"-addr", "-data", "-node", "-lease-ttl", "-version", "-shutdown-timeout", "-checkpoint-bytes"} {
		if !strings.Contains(out.String(), "  "+name+" ") && !strings.Contains(out.String(), "  "+name+"\n") {
			t.Errorf("-h does not list %s", name)
		}
	}
}

// TestBinary_ExitStatus: the built idemd exits 2 for a usage error (saying
// it once on the last line), 0 for -h and -version, and 1 for a runtime
// error (here: the port is taken).
func TestBinary_ExitStatus(t *testing.T) {
	bin := apitest.BuildIdemd(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := filepath.Join(t.TempDir(), "data")
	for _, c := range []struct {
		args   []string
		status int
		out    string // in stdout+stderr
	}{
		{[]string{"-executor", "0"}, 2, "idemd: -executor 0: must be at least 1\n"},
		{[]string{"-bogus"}, 2, "idemd: flag provided but not defined: -bogus\n"},
		{[]string{"extra"}, 2, `idemd: unexpected argument "extra"`},
		{[]string{"-h"}, 0, "-tokens FILE"},
		{[]string{"-version"}, 0, "idemd "},
		{[]string{"-addr", taken.Addr().String(), "-data", data}, 1, "idemd: -addr " + taken.Addr().String() + ": listen tcp"},
	} {
		cmd := exec.Command(bin, c.args...)
		out, err := cmd.CombinedOutput()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != c.status || !strings.Contains(string(out), c.out) {
			t.Errorf("idemd %q: exit %d, want %d; output want %q:\n%s", c.args, status, c.status, c.out, out)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a start that could not listen created the data directory: %v", err)
	}
}

package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// eventually calls f until it succeeds or d passes, and fails t with f's
// last error then. Each call gets a second.
func eventually(t *testing.T, d time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		<-tick.C
	}
}

// ctxT is a context that ends after d, or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStopLeaderAndRestart(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	c := Start(t, Options{MemberBinary: MemberBinaryForTests})
	t.Logf("start: %v", time.Since(t0))
	cli := c.Client(t)
	p := Prefix(t)

	if _, err := cli.Put(ctxT(t, 5*time.Second), p+"k", "1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctxT(t, 5*time.Second), p+"k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Fatalf("get: %v %v", resp, err)
	}

	old, err := c.Leader(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	c.Stop(old)
	t.Logf("stop leader: %v", time.Since(t0))
	if c.Running(old) {
		t.Fatalf("member %d running after Stop", old)
	}
	t0 = time.Now()
	now, err := c.Leader(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if now == old {
		t.Fatalf("leader is still the stopped member %d", old)
	}
	t.Logf("new leader %d after %v", now, time.Since(t0))
	eventually(t, 10*time.Second, "put after leader loss", func(ctx context.Context) error {
		_, err := cli.Put(ctx, p+"k", "2")
		return err
	})
	t.Logf("put after leader loss: %v", time.Since(t0))

	t0 = time.Now()
	c.Restart(t, old)
	t.Logf("restart: %v", time.Since(t0))
	if !c.Running(old) {
		t.Fatalf("member %d not running after Restart", old)
	}
	back := c.Client(t, old)
	eventually(t, 10*time.Second, "linearizable get from restarted member", func(ctx context.Context) error {
		resp, err := back.Get(ctx, p+"k")
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
			return fmt.Errorf("got %v, want 2", resp.Kvs)
		}
		return nil
	})
}

func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

func TestLinks(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Proxied: true, MemberBinary: MemberBinaryForTests})
	cli := c.Client(t)
	p := Prefix(t)
	if _, err := cli.Put(ctxT(t, 5*time.Second), p+"k", "0"); err != nil {
		t.Fatal(err)
	}

	t.Run("Blackhole", func(t *testing.T) {
		for i := range c.Endpoints() {
			c.Link(i).Blackhole()
		}
		t0 := time.Now()
		_, err := cli.Put(ctxT(t, 300*time.Millisecond), p+"k", "blackholed")
		if !isDeadline(err) {
			t.Fatalf("put through blackholes: %v, want a deadline error", err)
		}
		t.Logf("blackholed put failed after %v: %v", time.Since(t0), err)
		for i := range c.Endpoints() {
			c.Link(i).Heal()
		}
		t0 = time.Now()
		eventually(t, 10*time.Second, "put after heal", func(ctx context.Context) error {
			_, err := cli.Put(ctx, p+"k", "healed")
			return err
		})
		t.Logf("put after heal: %v", time.Since(t0))
	})

	t.Run("Cut", func(t *testing.T) {
		for i := range c.Endpoints() {
			c.Link(i).Cut()
		}
		// The client's connections are open: the first request on one
		// fails at once.
		t0 := time.Now()
		_, err := cli.Put(ctxT(t, 2*time.Second), p+"k", "cut")
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("put through cut links: %v, want code Unavailable", err)
		}
		t.Logf("cut put failed after %v: %v", time.Since(t0), err)
		for i := range c.Endpoints() {
			c.Link(i).Heal()
		}
		t0 = time.Now()
		eventually(t, 10*time.Second, "put after heal", func(ctx context.Context) error {
			_, err := cli.Put(ctx, p+"k", "healed")
			return err
		})
		t.Logf("put after heal: %v", time.Since(t0))
	})

	t.Run("Delay", func(t *testing.T) {
		one := c.Client(t, 0)
		if _, err := one.Get(ctxT(t, 5*time.Second), p+"k"); err != nil {
			t.Fatal(err)
		}
		const d = 100 * time.Millisecond
		c.Link(0).Delay(d)
		t0 := time.Now()
		if _, err := one.Get(ctxT(t, 5*time.Second), p+"k", clientv3.WithSerializable()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took < 2*d {
			t.Fatalf("get through a link delayed %v took %v, want at least %v", d, took, 2*d)
		} else {
			t.Logf("delayed get: %v", took)
		}
		c.Link(0).Delay(0)
		t0 = time.Now()
		if _, err := one.Get(ctxT(t, 5*time.Second), p+"k", clientv3.WithSerializable()); err != nil {
			t.Fatal(err)
		}
		t.Logf("undelayed get: %v", time.Since(t0))
	})
}

func TestCompactAndDefrag(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{MemberBinary: MemberBinaryForTests})
	cli := c.Client(t)
	p := Prefix(t)
	first, err := cli.Put(ctxT(t, 5*time.Second), p+"k", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"2", "3"} {
		if _, err := cli.Put(ctxT(t, 5*time.Second), p+"k", v); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	if err := c.CompactAndDefrag(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Logf("compact and defrag: %v", time.Since(t0))
	_, err = cli.Get(ctxT(t, 5*time.Second), p+"k", clientv3.WithRev(first.Header.Revision))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get at compacted revision %d: %v, want ErrCompacted", first.Header.Revision, err)
	}
	resp, err := cli.Get(ctxT(t, 5*time.Second), p+"k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "3" {
		t.Fatalf("current get: %v %v", resp, err)
	}
	// Again with nothing written since: the revision is compacted already.
	if err := c.CompactAndDefrag(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestCrashAll(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{MemberBinary: MemberBinaryForTests})
	cli := c.Client(t)
	p := Prefix(t)
	if _, err := cli.Put(ctxT(t, 5*time.Second), p+"k", "kept"); err != nil {
		t.Fatal(err)
	}
	for i := range c.Endpoints() {
		c.Stop(i)
	}
	if _, err := c.Leader(ctxT(t, 100*time.Millisecond)); err == nil {
		t.Fatal("a leader with every member stopped")
	}
	c.Restart(t) // all at once: one alone has no quorum
	for i := range c.Endpoints() {
		if !c.Running(i) {
			t.Fatalf("member %d not running after Restart", i)
		}
	}
	eventually(t, 10*time.Second, "get after restart", func(ctx context.Context) error {
		resp, err := cli.Get(ctx, p+"k")
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept" {
			return fmt.Errorf("got %v, want kept", resp.Kvs)
		}
		return nil
	})
}

func TestPrefix(t *testing.T) {
	a, b := Prefix(t), Prefix(t)
	if a == b || !strings.HasPrefix(a, "/idem-test/TestPrefix/") || !strings.HasSuffix(a, "/") {
		t.Fatalf("prefixes %q, %q", a, b)
	}
	t.Run("sub test", func(t *testing.T) {
		if p := Prefix(t); !strings.HasPrefix(p, "/idem-test/TestPrefix_sub_test/") {
			t.Fatalf("prefix %q", p)
		}
	})
}

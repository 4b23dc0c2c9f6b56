package main

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/lease"
)

// The values of -store.
const (
	storeLocal = "local"
	storeEtcd  = "etcd"
)

// etcdEndpointsMax bounds -etcd-endpoints: a cluster has an odd handful
// of members, never hundreds.
const etcdEndpointsMax = 16

// etcdDialTimeoutMin keeps a start from giving up on a cluster that is
// merely electing a leader.
const etcdDialTimeoutMin = 100 * time.Millisecond

// etcdSpaceIntervalMin keeps the space watcher from asking the members
// their size more often than is any use.
const etcdSpaceIntervalMin = 10 * time.Millisecond

// etcdFlags are the flags that mean nothing without -store etcd.
var etcdFlags = []string{"etcd-shards", "etcd-endpoints", "etcd-prefix", "etcd-dial-timeout", "etcd-ca", "etcd-cert", "etcd-key",
	"etcd-user", "etcd-password-file", "etcd-quota-bytes", "etcd-high-water", "etcd-space-interval", "advertise", "cluster-secret-file", "peer-ca"}

// parseStore checks -store and the flags that go with it: with etcd the
// endpoints and the advertised URL are required; with the local engine
// none of the etcd flags may be given (a flag that would be ignored is a
// mistake the operator wants to hear about).
func (c *config) parseStore(endpoints string, set map[string]bool) error {
	switch c.store {
	case storeLocal:
		for _, f := range etcdFlags {
			if set[f] {
				return usagef("-%s: only with -store etcd", f)
			}
		}
		return nil
	case storeEtcd:
	default:
		return usagef("-store %q: must be local or etcd", c.store)
	}
	if c.etcdPrefix == "" || !strings.HasSuffix(c.etcdPrefix, "/") {
		// Without a trailing separator one deployment's prefix could be
		// the start of another's ("/idem" and "/idem2").
		return usagef("-etcd-prefix %q: must end in '/'", c.etcdPrefix)
	}
	if err := c.parseTargets(endpoints, set); err != nil {
		return err
	}
	if c.etcdDialTimeout < etcdDialTimeoutMin {
		return usagef("-etcd-dial-timeout %v: must be at least %v", c.etcdDialTimeout, etcdDialTimeoutMin)
	}
	if c.etcdQuota < 0 {
		return usagef("-etcd-quota-bytes %d: must be 0 (the members' own) or positive", c.etcdQuota)
	}
	if c.etcdSpaceEvery < etcdSpaceIntervalMin {
		return usagef("-etcd-space-interval %v: must be at least %v", c.etcdSpaceEvery, etcdSpaceIntervalMin)
	}
	if !(c.etcdHighWater > 0 && c.etcdHighWater <= 1) {
		return usagef("-etcd-high-water %v: must be a share of the quota in (0, 1]", c.etcdHighWater)
	}
	return validAdvertise(c.advertise)
}

// shardMapExcludes are the flags a shard map's entries take the place of.
var shardMapExcludes = []string{"etcd-endpoints", "etcd-ca", "etcd-cert", "etcd-key", "etcd-user", "etcd-password-file"}

// parseTargets sets c.targets: the shards of -etcd-shards, or the one
// cluster of -etcd-endpoints and its -etcd-* flags.
func (c *config) parseTargets(endpoints string, set map[string]bool) error {
	if c.etcdShards != "" {
		for _, f := range shardMapExcludes {
			if set[f] {
				return usagef("-%s: not with -etcd-shards, whose entries name each shard's", f)
			}
		}
		m, err := loadShardMap(c.etcdShards, c.etcdPrefix)
		if err != nil {
			return err
		}
		c.shardMap, c.targets = m, m.Shards
		return nil
	}
	for _, ep := range strings.Split(endpoints, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		if !validEndpoint(ep) {
			return usagef("-etcd-endpoints: %q must be host:port", ep)
		}
		c.etcdEndpoints = append(c.etcdEndpoints, ep)
	}
	if len(c.etcdEndpoints) == 0 || len(c.etcdEndpoints) > etcdEndpointsMax {
		return usagef("-etcd-endpoints %q: -store etcd needs 1..%d endpoints, host:port,host:port (or -etcd-shards)", endpoints, etcdEndpointsMax)
	}
	if (c.etcdCert == "") != (c.etcdKey == "") {
		return usagef("-etcd-cert and -etcd-key: give both or neither")
	}
	if c.etcdCert != "" && c.etcdCA == "" {
		return usagef("-etcd-cert: a client certificate needs TLS: give -etcd-ca too")
	}
	if (c.etcdUser == "") != (c.etcdPassword == "") {
		return usagef("-etcd-user and -etcd-password-file: give both or neither")
	}
	c.targets = []etcdTarget{{Endpoints: c.etcdEndpoints, Prefix: c.etcdPrefix, CA: c.etcdCA, Cert: c.etcdCert, Key: c.etcdKey,
		User: c.etcdUser, Password: c.etcdPassword}}
	return nil
}

// validEndpoint: host:port, with an optional http:// or https://.
func validEndpoint(ep string) bool {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://"))
	return err == nil && validPort(port)
}

// validAdvertise: the URL peers will dial, so a full http or https URL
// with a host and a port and nothing else.
func validAdvertise(s string) error {
	u, err := url.Parse(s)
	if s == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" ||
		!validPort(u.Port()) || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || len(s) > lease.AdvertiseBytesMax {
		return usagef("-advertise %q: -store etcd needs the URL peers reach this node at, http://host:port or https://host:port (at most %d bytes)", s, lease.AdvertiseBytesMax)
	}
	return nil
}

func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

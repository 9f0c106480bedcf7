package registry

import (
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// decodeCache keeps decoded values by key and mod revision, so that the
// leader's snapshots and the blocking queries, which read every alloc each
// time, decode only what changed since the last read. A value at a given
// revision never changes, so a hit is always right.
//
// Entries for keys that a full read no longer sees are dropped, which bounds
// the cache by the live keys.
type decodeCache struct {
	mu sync.Mutex
	m  map[string]cacheEntry
}

type cacheEntry struct {
	rev int64
	v   any
}

// begin starts a read; a full read collects the keys it sees.
func (c *decodeCache) begin(full bool) map[string]cacheEntry {
	if !full {
		return nil
	}
	return map[string]cacheEntry{}
}

// get returns kv decoded, from the cache when its revision matches.
func (c *decodeCache) get(kv *mvccpb.KeyValue, seen map[string]cacheEntry, decode func([]byte) (any, error)) (any, error) {
	key := string(kv.Key)
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok || e.rev != kv.ModRevision {
		v, err := decode(kv.Value)
		if err != nil {
			return nil, err
		}
		e = cacheEntry{rev: kv.ModRevision, v: v}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]cacheEntry{}
		}
		c.m[key] = e
		c.mu.Unlock()
	}
	if seen != nil {
		seen[key] = e
	}
	return e.v, nil
}

// end finishes a read: after a full read, only what it saw stays.
func (c *decodeCache) end(seen map[string]cacheEntry) {
	if seen == nil {
		return
	}
	c.mu.Lock()
	c.m = seen
	c.mu.Unlock()
}

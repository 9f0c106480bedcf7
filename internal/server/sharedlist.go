package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Shared list answers. A change wakes every blocking query waiting on its
// topic at once: two hundred `GET /v1/allocations?index=` (a dashboard per
// operator, scripts) woken by one status report each read and encoded the
// whole cluster's allocations, two hundred full copies at the same moment
// (a server went from 90 to 567 MB of RSS). A list query instead takes
// its answer from a sharedLists: the queries woken together share one
// read and one encoding, and each writes it out element by element, so
// that what a query holds of its own is one element's worth of buffer.

// encodedList is a list answer as written out: each element's JSON, with
// the namespace that decides who may read it, and the revision it was
// read at (the answer's index).
type encodedList struct {
	rev   int64
	items []encodedItem
}

type encodedItem struct {
	namespace string
	json      []byte
}

// encodeList encodes each element of list once.
func encodeList[T any](rev int64, list []T, namespace func(T) string) (*encodedList, error) {
	out := &encodedList{rev: rev, items: make([]encodedItem, len(list))}
	for i, v := range list {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out.items[i] = encodedItem{namespace: namespace(v), json: b}
	}
	return out, nil
}

// write writes the elements that keep allows as a JSON array, as
// httpapi.WriteJSON would have.
func (l *encodedList) write(w http.ResponseWriter, keep func(namespace string) bool) error {
	w.Header().Set("Content-Type", "application/json")
	if l.rev > 0 {
		w.Header().Set("X-Drover-Index", strconv.FormatInt(l.rev, 10))
	}
	sep := []byte("[")
	for _, it := range l.items {
		if !keep(it.namespace) {
			continue
		}
		if _, err := w.Write(sep); err != nil {
			return err
		}
		if _, err := w.Write(it.json); err != nil {
			return err
		}
		sep = []byte(",")
	}
	if sep[0] == '[' {
		_, err := w.Write([]byte("[]\n"))
		return err
	}
	_, err := w.Write([]byte("]\n"))
	return err
}

// sharedLists builds list answers for all the queries that need one at
// the same time, one build at a time per key (a list and its filters):
// while one is under way, those that it is too old for wait for the next,
// which they share. However many queries, a key has at most two answers
// being built or waited for.
type sharedLists struct {
	mu   sync.Mutex
	keys map[string]*listKey
}

type listKey struct {
	cur  *listBuild // under way
	next *listBuild // to start when cur is done; nil if nobody needs it
}

type listBuild struct {
	started time.Time
	done    chan struct{}
	list    *encodedList
	err     error
}

// get returns key's answer as read after the call: the build under way if
// it started since, or else the next one. An answer never predates the
// question, so it shows whatever the client wrote before asking, and the
// change that woke a blocking query.
func (s *sharedLists) get(ctx context.Context, key string, build func(context.Context) (*encodedList, error)) (*encodedList, error) {
	since := time.Now()
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string]*listKey{}
	}
	k := s.keys[key]
	var b *listBuild
	switch {
	case k == nil:
		k = &listKey{cur: &listBuild{started: time.Now(), done: make(chan struct{})}}
		s.keys[key] = k
		b = k.cur
		go s.run(key, k, build)
	case !k.cur.started.Before(since):
		b = k.cur
	default:
		if k.next == nil {
			k.next = &listBuild{done: make(chan struct{})}
		}
		b = k.next
	}
	s.mu.Unlock()
	select {
	case <-b.done:
		return b.list, b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run builds key's answers until nobody waits for a next one; a finished
// answer is not kept, so nothing of it outlives the queries that took it.
// The builds are not the queries': they end by the registry's own
// timeout, whoever gave up waiting.
func (s *sharedLists) run(key string, k *listKey, build func(context.Context) (*encodedList, error)) {
	for {
		b := k.cur // only run changes it
		buildOne(b, build)
		s.mu.Lock()
		close(b.done)
		k.cur, k.next = k.next, nil
		if k.cur == nil {
			delete(s.keys, key)
			s.mu.Unlock()
			return
		}
		k.cur.started = time.Now()
		s.mu.Unlock()
	}
}

// buildOne builds b. A panic fails the answer, not the server: the build
// runs on no request's goroutine, where nothing would recover it.
func buildOne(b *listBuild, build func(context.Context) (*encodedList, error)) {
	defer func() {
		if p := recover(); p != nil {
			b.list, b.err = nil, fmt.Errorf("building the answer failed: %v", p)
		}
	}()
	b.list, b.err = build(context.Background())
}

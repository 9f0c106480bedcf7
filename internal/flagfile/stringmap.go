package flagfile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// StringMap is a map flag: --meta k=v, repeatable, each one adding a key.
// In a config file it is an object of strings (MapValue).
type StringMap struct {
	m   *map[string]string
	set bool
}

// NewStringMap is a StringMap that fills *m.
func NewStringMap(m *map[string]string) *StringMap { return &StringMap{m: m} }

// Set adds one key=value; the first Set replaces the default.
func (s *StringMap) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", kv)
	}
	if !s.set || *s.m == nil {
		*s.m = map[string]string{}
		s.set = true
	}
	(*s.m)[k] = v
	return nil
}

// ReplaceMap replaces the whole map, as a config file does.
func (s *StringMap) ReplaceMap(m map[string]string) {
	*s.m = maps.Clone(m)
	s.set = true
}

// Type names the value in the help: --meta key=value.
func (s *StringMap) Type() string { return "key=value" }

func (s *StringMap) String() string {
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(*s.m)) {
		kvs = append(kvs, k+"="+(*s.m)[k])
	}
	return strings.Join(kvs, ",")
}

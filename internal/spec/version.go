package spec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Versions for the version and semver constraint operators. A version is
// dotted numbers with an optional "v" in front, an optional "-prerelease"
// and an optional "+build" (ignored): "1.2", "v1.2.3-rc.1+abc". The semver
// operator requires exactly three numbers in the node's value; version takes
// any count, missing numbers read as 0 ("1.2" = "1.2.0").
//
// Versions order by their numbers; on equal numbers a prerelease comes
// before the release, and prereleases order as SemVer 2.0 says:
// dot-separated identifiers compared one by one, numeric ones as numbers
// and before alphanumeric ones, and a shorter list first when all else is
// equal.
//
// The version operator adds one rule, as HashiCorp's go-version does: a
// prerelease node version meets a term only when the term names a
// prerelease of the same numbers ("2.0.0-rc.1" meets ">= 2.0.0-beta" but not
// "< 2"), so that release constraints never pick up release candidates.
// The semver operator orders prereleases as SemVer 2.0 does and has no such
// rule ("2.0.0-rc.1" meets "< 2.0.0").
//
// A version constraint is comma-separated terms that must all hold, each an
// operator and a version: "= 1.2", "!= 1.2", "> 1.2", ">= 1.2", "< 2",
// "<= 2", and "~> 1.2" (at least 1.2, below 2) or "~> 1.2.3" (at least
// 1.2.3, below 1.3). A term without an operator means "=".

type version struct {
	nums []uint64
	pre  []string // prerelease identifiers, nil for a release
}

// maxVersionParts bounds the numbers in a version: no one writes more, and
// a bound keeps a hostile attribute from costing anything.
const maxVersionParts = 8

func parseVersion(s string, strict bool) (version, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	s, _, _ = strings.Cut(s, "+")
	core, pre, hasPre := strings.Cut(s, "-")
	var v version
	for part := range strings.SplitSeq(core, ".") {
		if part == "" || len(v.nums) == maxVersionParts || strings.TrimLeft(part, "0123456789") != "" {
			return version{}, false
		}
		if strict && len(part) > 1 && part[0] == '0' {
			return version{}, false
		}
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return version{}, false
		}
		v.nums = append(v.nums, n)
	}
	if strict && len(v.nums) != 3 {
		return version{}, false
	}
	if hasPre {
		if pre == "" {
			return version{}, false
		}
		v.pre = strings.Split(pre, ".")
		for _, id := range v.pre {
			if id == "" {
				return version{}, false
			}
		}
	}
	return v, true
}

func compareVersions(a, b version) int {
	for i := range max(len(a.nums), len(b.nums)) {
		var x, y uint64
		if i < len(a.nums) {
			x = a.nums[i]
		}
		if i < len(b.nums) {
			y = b.nums[i]
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	switch {
	case a.pre == nil && b.pre == nil:
		return 0
	case a.pre == nil:
		return 1
	case b.pre == nil:
		return -1
	}
	for i := range min(len(a.pre), len(b.pre)) {
		if c := comparePrerelease(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	return compareInt(len(a.pre), len(b.pre))
}

func comparePrerelease(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type versionTerm struct {
	op string // =, !=, <, <=, >, >=, ~>
	v  version
	// upper is the exclusive bound of ~>.
	upper version
}

type versionConstraint []versionTerm

var versionOps = []string{"~>", ">=", "<=", "!=", ">", "<", "="} // longest first

func parseVersionConstraint(s string) (versionConstraint, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty; write terms such as \">= 1.2, < 2\"")
	}
	var vc versionConstraint
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		op := "="
		for _, o := range versionOps {
			if rest, ok := strings.CutPrefix(term, o); ok {
				op, term = o, strings.TrimSpace(rest)
				break
			}
		}
		v, ok := parseVersion(term, false)
		if !ok {
			return nil, fmt.Errorf("%q is not a version (dotted numbers such as 1.2.3)", term)
		}
		t := versionTerm{op: op, v: v}
		if op == "~>" {
			keep := max(len(v.nums)-1, 1)
			t.upper.nums = append([]uint64(nil), v.nums[:keep]...)
			t.upper.nums[keep-1]++
		}
		vc = append(vc, t)
	}
	return vc, nil
}

// check reports whether v meets every term; strictPre applies the version
// operator's prerelease rule.
func (vc versionConstraint) check(v version, strictPre bool) bool {
	for _, t := range vc {
		if strictPre && v.pre != nil && (t.v.pre == nil || !sameNumbers(v, t.v)) {
			return false
		}
		c := compareVersions(v, t.v)
		var ok bool
		switch t.op {
		case "=":
			ok = c == 0
		case "!=":
			ok = c != 0
		case "<":
			ok = c < 0
		case "<=":
			ok = c <= 0
		case ">":
			ok = c > 0
		case ">=":
			ok = c >= 0
		case "~>":
			ok = c >= 0 && compareVersions(v, t.upper) < 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func sameNumbers(a, b version) bool {
	return compareVersions(version{nums: a.nums}, version{nums: b.nums}) == 0
}

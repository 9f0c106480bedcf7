// Package inputlimit bounds what drover's decoders are given, before they
// parse it: its size, and how deep it nests. A stack overflow is fatal in
// Go (no recover catches it), and the parsers drover uses recurse once per
// level of nesting: HCL's parser and evaluator, the job file's JSON tree,
// the walks over them. So a job file or an ACL policy nested deep enough
// killed the server or the CLI whatever the handler's recover did. The
// scans here are linear, keep their own stack and never recurse.
//
// Every decoder checks: job files in every format (internal/jobfile), ACL
// policies (internal/acl), and every API request body (internal/server).
package inputlimit

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxBytes bounds one input: an API request body, a job file, a policy.
// A job file is small (Nomad's default job_max_source_size is 1 MB).
const MaxBytes = 1 << 20

// MaxDepth bounds how deep an input nests. The deepest job files nest about
// ten levels (a JSON job's groups, tasks, services, checks and
// check_restart, each an array of objects); a stack overflows somewhere
// past 100,000.
const MaxDepth = 64

// TooLargeError is an input over MaxBytes.
type TooLargeError struct {
	// Size is the input's size, or MaxBytes+1 when it was read only
	// that far.
	Size int
}

func (e *TooLargeError) Error() string {
	if e.Size > MaxBytes+1 {
		return fmt.Sprintf("is %d bytes; the limit is %d (1 MiB)", e.Size, MaxBytes)
	}
	return fmt.Sprintf("is larger than %d bytes (1 MiB), the limit", MaxBytes)
}

// TooDeepError is an input that nests deeper than MaxDepth.
type TooDeepError struct {
	Depth int // the deepest it nests
	// Where it first nests deeper than MaxDepth: a byte offset, and the
	// 1-based line and column (in characters).
	Offset, Line, Col int
}

func (e *TooDeepError) Error() string {
	return fmt.Sprintf("nests %d levels deep (line %d, column %d); the limit is %d", e.Depth, e.Line, e.Col, MaxDepth)
}

// Size refuses an input of n bytes over MaxBytes.
func Size(n int) error {
	if n > MaxBytes {
		return &TooLargeError{Size: n}
	}
	return nil
}

// depth follows the nesting of an input through a scan and remembers the
// deepest point and where MaxDepth was first passed.
type depth struct {
	now, max int
	over     int // offset where now first passed MaxDepth; -1 if never
}

func newDepth() depth { return depth{over: -1} }

func (d *depth) add(n, off int) {
	d.now += n
	d.max = max(d.max, d.now)
	if d.now > MaxDepth && d.over < 0 {
		d.over = off
	}
}

// result is the TooDeepError for src, or nil.
func (d *depth) result(src []byte) error {
	if d.over < 0 {
		return nil
	}
	line := 1 + bytes.Count(src[:d.over], []byte("\n"))
	start := bytes.LastIndexByte(src[:d.over], '\n') + 1
	return &TooDeepError{Depth: d.max, Offset: d.over, Line: line, Col: 1 + utf8.RuneCount(src[start:d.over])}
}

// JSON checks the size of a JSON text and the nesting of its objects and
// arrays. Brackets inside strings do not count.
func JSON(src []byte) error {
	if err := Size(len(src)); err != nil {
		return err
	}
	d := jsonDepth(src)
	return d.result(src)
}

func jsonDepth(src []byte) depth {
	d := newDepth()
	inString, escaped := false, false
	for i, b := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d.add(1, i)
		case (b == '}' || b == ']') && d.now > 0:
			// A stray closer (the parser will say so) must not
			// hide the nesting that follows it.
			d.add(-1, i)
		}
	}
	return d
}

// HCL checks the size of an HCL file and how deep its parser would
// recurse, reading the file with HCL's own lexer, which does not recurse,
// so that strings, comments and heredocs are told apart exactly as the
// parser will.
//
// Brackets, braces, parentheses, quotes, heredocs and template sequences
// ("${", "%{") nest. So do operators: the parser recurses for each unary
// operator and each "?", and a chain of binary operators, indexes or
// attribute accesses ("1+1+...", "x[0][0]...") becomes a tree as deep as
// the chain, which evaluation then walks. Each operator counts one level
// until the end of its expression: a comma, a closing bracket, or a new
// line in a body or an object.
func HCL(src []byte) error {
	if err := Size(len(src)); err != nil {
		return err
	}
	d := hclDepth(src)
	return d.result(src)
}

func hclDepth(src []byte) depth {
	tokens, _ := hclsyntax.LexConfig(src, "", hcl.InitialPos) // the parser reports lexical errors
	type level struct {
		opener hclsyntax.TokenType
		ops    int // operators counted in the level's current expression
	}
	d := newDepth()
	cur := level{opener: hclsyntax.TokenNil} // the file's body
	var outer []level
	prev := hclsyntax.TokenNil
	for _, tok := range tokens {
		off := tok.Range.Start.Byte
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			// An index ("x[0]") and a template directive ("%{ if }",
			// which nests what follows it up to its "%{ end }")
			// deepen the expression they are in, besides opening
			// their own level.
			if tok.Type == hclsyntax.TokenTemplateControl || tok.Type == hclsyntax.TokenOBrack && endsOperand(prev) {
				cur.ops++
				d.add(1, off)
			}
			outer = append(outer, cur)
			cur = level{opener: tok.Type}
			d.add(1, off)
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(outer) > 0 { // a stray closer is the parser's to report
				d.add(-1-cur.ops, off)
				cur, outer = outer[len(outer)-1], outer[:len(outer)-1]
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenBang, hclsyntax.TokenQuestion, hclsyntax.TokenDot, hclsyntax.TokenEllipsis:
			cur.ops++
			d.add(1, off)
		case hclsyntax.TokenComma:
			d.add(-cur.ops, off)
			cur.ops = 0
		case hclsyntax.TokenNewline:
			// Inside parentheses, brackets and templates a new line
			// does not end an expression.
			if cur.opener == hclsyntax.TokenNil || cur.opener == hclsyntax.TokenOBrace {
				d.add(-cur.ops, off)
				cur.ops = 0
			}
		}
		if tok.Type != hclsyntax.TokenNewline && tok.Type != hclsyntax.TokenComment {
			prev = tok.Type
		}
	}
	return d
}

// endsOperand reports whether a token of type t can end an operand, so
// that a '[' after it is an index rather than a tuple.
func endsOperand(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCBrace, hclsyntax.TokenIdent,
		hclsyntax.TokenNumberLit, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenStar:
		return true
	}
	return false
}

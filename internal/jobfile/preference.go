package jobfile

import (
	"fmt"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/spec"
)

// A weight of 0 is how the spec says "unset", so a weight written as 0
// would silently become the default, 50: the opposite of what 0 suggests.
// The decoders refuse it where it is written (validation cannot tell a
// written 0 from a missing weight).
const (
	zeroAffinityWeight = "weight 0 would mean the default weight, 50; use 1 to 100 to prefer matching nodes, -1 to -100 to avoid them, or remove the affinity"
	zeroSpreadWeight   = "weight 0 would mean the default weight, 50; use 1 to 100, or remove the spread"
)

// affinity decodes an affinity block. Like a constraint's, its attribute
// and value are kept as written, "${...}" targets included.
func (d *hclDecoder) affinity(b *hclsyntax.Block, path, in string) *spec.Affinity {
	a := &spec.Affinity{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Affinity](), in, path) {
		field := path + "." + it.name
		if it.name == "weight" {
			a.Weight = d.weight(it.attr, field, zeroAffinityWeight)
			continue
		}
		s, ok := d.targetText(it.attr, field)
		if !ok {
			continue
		}
		switch it.name {
		case "attribute":
			a.Attribute = s
		case "operator":
			a.Operator = s
		case "value":
			a.Value = s
		}
	}
	return a
}

// spread decodes a spread block, Nomad's shape:
//
//	spread {
//	  attribute = "${meta.zone}"
//	  weight    = 80
//	  target "us-east" { percent = 60 }
//	}
func (d *hclDecoder) spread(b *hclsyntax.Block, path, in string) *spec.Spread {
	s := &spec.Spread{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Spread](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "attribute":
			if v, ok := d.targetText(it.attr, field); ok {
				s.Attribute = v
			}
		case "weight":
			s.Weight = d.weight(it.attr, field, zeroSpreadWeight)
		case "target":
			tp := fmt.Sprintf("%s.targets[%d]", path, len(s.Targets))
			if len(s.Targets) == 0 {
				// Problems with the targets as a whole (their sum) are
				// shown at the first one.
				d.mark(path+".targets", it.block.TypeRange)
			}
			s.Targets = append(s.Targets, d.target(it.block, tp))
		}
	}
	return s
}

func (d *hclDecoder) target(b *hclsyntax.Block, path string) spec.SpreadTarget {
	var t spec.SpreadTarget
	d.mark(path, b.TypeRange)
	t.Value = d.label(b, path+".value")
	for _, it := range d.content(b.Body, bodyOf[spec.SpreadTarget](), fmt.Sprintf("in target %q", t.Value), path) {
		if it.name == "percent" {
			if n, ok := d.int(it.attr, path+".percent"); ok {
				t.Percent = n
			}
		}
	}
	return t
}

// weight reads an affinity's or a spread's weight, refusing a written 0
// with zeroMsg.
func (d *hclDecoder) weight(a *hclsyntax.Attribute, field, zeroMsg string) int {
	n, ok := d.int(a, field)
	if !ok {
		return 0
	}
	if n == 0 {
		d.errAt(a.Expr.Range(), "%s", zeroMsg)
		d.c.markReported(field)
	}
	return n
}

// network decodes a group's network block, Nomad's shape:
//
//	network {
//	  port "http" { static = 8080 }
//	  port "metrics" {}             # dynamic: the scheduler picks one
//	  port "app" { to = 8080 }      # a docker task's container port
//	}
func (d *hclDecoder) network(b *hclsyntax.Block, path, group string) *spec.Network {
	n := &spec.Network{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Network](), fmt.Sprintf("in the network block of group %q", group), path) {
		if it.name == "port" {
			n.Ports = append(n.Ports, d.port(it.block, fmt.Sprintf("%s.ports[%d]", path, len(n.Ports))))
		}
	}
	return n
}

func (d *hclDecoder) port(b *hclsyntax.Block, path string) spec.Port {
	var p spec.Port
	d.mark(path, b.TypeRange)
	p.Label = d.label(b, path+".label")
	for _, it := range d.content(b.Body, bodyOf[spec.Port](), fmt.Sprintf("in port %q", p.Label), path) {
		switch it.name {
		case "static":
			if n, ok := d.int(it.attr, path+".static"); ok {
				p.Static = n
			}
		case "to":
			if n, ok := d.int(it.attr, path+".to"); ok {
				p.To = n
			}
		}
	}
	return p
}

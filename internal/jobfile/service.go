package jobfile

import (
	"fmt"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/spec"
)

// service decodes a task's service block, Nomad's shape:
//
//	service {
//	  name = "web"
//	  port = "http"
//	  tags = ["v1"]
//	  check {
//	    type     = "http"
//	    path     = "/health"
//	    interval = "5s"
//	    check_restart { limit = 3 }
//	  }
//	}
func (d *hclDecoder) service(b *hclsyntax.Block, path, task string) *spec.Service {
	s := &spec.Service{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	in := fmt.Sprintf("in a service block of task %q", task)
	for _, it := range d.content(b.Body, bodyOf[spec.Service](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "name":
			if v, ok := d.str(it.attr, field); ok {
				s.Name = v
			}
		case "port":
			if v, ok := d.str(it.attr, field); ok {
				s.PortLabel = v
			}
		case "tags":
			s.Tags = d.stringList(it.attr, field)
		case "check":
			s.Checks = append(s.Checks, d.check(it.block, fmt.Sprintf("%s.checks[%d]", path, len(s.Checks)), s.Name))
		}
	}
	return s
}

func (d *hclDecoder) check(b *hclsyntax.Block, path, service string) *spec.Check {
	c := &spec.Check{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	in := fmt.Sprintf("in a check block of service %q", service)
	for _, it := range d.content(b.Body, bodyOf[spec.Check](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "name", "type", "port", "path", "command":
			v, ok := d.str(it.attr, field)
			if !ok {
				continue
			}
			switch it.name {
			case "name":
				c.Name = v
			case "type":
				c.Type = spec.CheckType(v)
			case "port":
				c.PortLabel = v
			case "path":
				c.Path = v
			case "command":
				c.Command = v
			}
		case "args":
			c.Args = d.stringList(it.attr, field)
		case "interval", "timeout", "grace":
			v, ok := d.duration(it.attr, field)
			if !ok {
				continue
			}
			switch it.name {
			case "interval":
				c.Interval = v
			case "timeout":
				c.Timeout = v
			case "grace":
				c.Grace = v
			}
		case "check_restart":
			c.Restart = d.checkRestart(it.block, path+".check_restart", fmt.Sprintf("in a check_restart block of service %q", service))
		}
	}
	return c
}

func (d *hclDecoder) checkRestart(b *hclsyntax.Block, path, in string) *spec.CheckRestart {
	r := &spec.CheckRestart{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.CheckRestart](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "limit":
			if n, ok := d.int(it.attr, field); ok {
				r.Limit = n
			}
		case "grace":
			if v, ok := d.duration(it.attr, field); ok {
				r.Grace = v
			}
		}
	}
	return r
}

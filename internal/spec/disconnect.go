package spec

import "time"

// Nomad writes a group's disconnect policy three ways: disconnect {
// stop_on_client_after }, its older group-level
// stop_after_client_disconnect, and drover's own disconnect { stop_after }.
// Canonicalize keeps one: StopAfter. A disconnect block that sets none of
// them (only Nomad's lost_after, replace or reconcile, which the decoders
// warn of) is no policy.
func canonicalizeDisconnect(g *Group) {
	if d := g.Disconnect; d != nil && d.StopOnClientAfter != 0 && (d.StopAfter == 0 || d.StopAfter == d.StopOnClientAfter) {
		d.StopAfter, d.StopOnClientAfter = d.StopOnClientAfter, 0
	}
	if g.StopAfterClientDisconnect != 0 {
		if g.Disconnect == nil {
			g.Disconnect = &DisconnectPolicy{}
		}
		if g.Disconnect.StopAfter == 0 || g.Disconnect.StopAfter == g.StopAfterClientDisconnect {
			g.Disconnect.StopAfter, g.StopAfterClientDisconnect = g.StopAfterClientDisconnect, 0
		}
	}
	if d := g.Disconnect; d != nil && *d == (DisconnectPolicy{}) {
		g.Disconnect = nil
	}
}

func validateDisconnect(ps *Problems, path string, g *Group) {
	if g.StopAfterClientDisconnect != 0 {
		ps.Add(path+".stop_after_client_disconnect", "stop_after_client_disconnect %s differs from disconnect's stop_after %s; write it once, as disconnect { stop_on_client_after }",
			g.StopAfterClientDisconnect.Short(), g.Disconnect.StopAfter.Short())
	}
	d := g.Disconnect
	if d == nil {
		return
	}
	if d.StopOnClientAfter != 0 {
		ps.Add(path+".disconnect.stop_on_client_after", "stop_on_client_after %s and stop_after %s are the same setting, written twice differently; write one",
			d.StopOnClientAfter.Short(), d.StopAfter.Short())
	}
	if d.StopAfter < Duration(time.Second) || d.StopAfter > MaxStopAfter {
		ps.Add(path+".disconnect.stop_after", "stop_after (Nomad: stop_on_client_after) must be between 1s and %s, got %s", MaxStopAfter, d.StopAfter)
	}
}

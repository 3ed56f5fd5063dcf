package endpointslice

import (
	"sort"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Placement is what a sync writes, in order: slices to create, new contents for existing
// slices, slices to delete.
type Placement struct {
	Create []*discoveryv1.EndpointSlice
	Update []*discoveryv1.EndpointSlice
	Delete []*discoveryv1.EndpointSlice
}

// Place decides where each desired endpoint lives, given the Service's existing slices. It
// is the controller's placement core (no I/O), built on one rule: an endpoint stays in the
// slice that already lists it while that slice keeps its port mapping. Endpoints are never
// shuffled between slices of one mapping, so no reader ever sees a pod twice in slices of one
// port mapping, even between two writes of a sync, and a converged Service is written nothing.
// As upstream's reconciler: gaps left by gone endpoints are filled before new slices are made,
// a slice whose mapping is gone is reused rather than deleted and created (taking, when the
// Service's ports change, the endpoints it already lists, so each slice is rewritten in place),
// and a Service with no endpoints keeps one empty slice.
//
// An endpoint whose mapping changes (the Service's ports changed) moves between slices of two
// mappings; as upstream, additions are written before removals (creates, then updates that
// add, then the others, then deletes), so a reader may see it under both mappings for a
// moment rather than under neither.
//
// A slice's address type is immutable, so slices are reused only within one.
//
// Groups of one mapping are taken as one. newSlice gives a fresh slice (metadata) whose AddressType, Endpoints and Ports are the
// group's.
func Place(existing []*discoveryv1.EndpointSlice, want []Group, max int, newSlice func(Group) *discoveryv1.EndpointSlice) Placement {
	want = merge(want)
	existing = append([]*discoveryv1.EndpointSlice(nil), existing...)
	sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
	byKey := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := mappingKey(s.AddressType, s.Ports)
		byKey[k] = append(byKey[k], s)
	}

	// contents of an existing slice after the sync (nil: the slice is free).
	next := map[string]*discoveryv1.EndpointSlice{}
	rests := make([][]discoveryv1.Endpoint, len(want)) // each group's endpoints not yet placed
	var placeholders []Group                           // empty groups with no slice to be
	for gi, g := range want {
		key := mappingKey(g.AddressType, g.Ports)
		desired := make(map[string]discoveryv1.Endpoint, len(g.Endpoints))
		for _, e := range g.Endpoints {
			if _, dup := desired[endpointKey(e)]; !dup {
				desired[endpointKey(e)] = e
			}
		}
		placed := map[string]bool{}
		var mine []*discoveryv1.EndpointSlice // this mapping's slices, by name, as they will be
		for _, s := range byKey[key] {
			w := newSlice(Group{AddressType: g.AddressType, Ports: g.Ports})
			for _, e := range s.Endpoints {
				k := endpointKey(e)
				if d, ok := desired[k]; ok && !placed[k] {
					w.Endpoints = append(w.Endpoints, d)
					placed[k] = true
				}
			}
			mine = append(mine, w)
		}
		for _, e := range g.Endpoints {
			if k := endpointKey(e); !placed[k] { // an address listed twice is placed once
				placed[k] = true
				rests[gi] = append(rests[gi], e)
			}
		}
		for _, w := range mine {
			rests[gi] = fill(w, rests[gi], max)
		}
		placeholder := len(g.Endpoints) == 0 // the one empty slice of a Service without endpoints
		for i, w := range mine {
			// An emptied slice is free for reuse, unless it can be that empty slice.
			if len(w.Endpoints) > 0 || placeholder {
				placeholder = false
				next[byKey[key][i].Name] = w
			}
		}
		if placeholder {
			placeholders = append(placeholders, Group{AddressType: g.AddressType, Ports: g.Ports})
		}
	}

	// Free slices take the endpoints of new mappings, first those they already list.
	var free []*discoveryv1.EndpointSlice
	for _, s := range existing {
		if next[s.Name] == nil {
			free = append(free, s)
		}
	}
	var fresh []*discoveryv1.EndpointSlice // chunks with no slice yet
	for gi, g := range want {
		rest := rests[gi]
		var claimed []*discoveryv1.EndpointSlice
		for _, f := range free {
			if next[f.Name] != nil || len(rest) == 0 {
				continue
			}
			if f.AddressType != g.AddressType { // immutable: such a slice is deleted, not reused
				continue
			}
			w := newSlice(Group{AddressType: g.AddressType, Ports: g.Ports})
			inRest := map[string]int{}
			for i, e := range rest {
				inRest[endpointKey(e)] = i
			}
			taken := map[int]bool{}
			for _, e := range f.Endpoints {
				if i, ok := inRest[endpointKey(e)]; ok && !taken[i] && len(w.Endpoints) < max {
					w.Endpoints = append(w.Endpoints, rest[i])
					taken[i] = true
				}
			}
			if len(taken) == 0 {
				continue
			}
			var left []discoveryv1.Endpoint
			for i, e := range rest {
				if !taken[i] {
					left = append(left, e)
				}
			}
			rest = left
			next[f.Name] = w
			claimed = append(claimed, w)
		}
		for _, w := range claimed {
			rest = fill(w, rest, max)
		}
		for len(rest) > 0 {
			n := min(max, len(rest))
			fresh = append(fresh, newSlice(Group{AddressType: g.AddressType, Ports: g.Ports, Endpoints: rest[:n]}))
			rest = rest[n:]
		}
	}
	for _, g := range placeholders {
		fresh = append(fresh, newSlice(g))
	}
	for _, f := range free {
		for i, w := range fresh {
			if next[f.Name] == nil && w.AddressType == f.AddressType {
				next[f.Name] = w
				fresh = append(fresh[:i:i], fresh[i+1:]...)
				break
			}
		}
	}

	p := Placement{Create: fresh}
	var removing []*discoveryv1.EndpointSlice
	for _, s := range existing {
		w, ok := next[s.Name]
		switch {
		case !ok || w == nil:
			p.Delete = append(p.Delete, s)
		case sameContents(s, w):
		case addsEndpoints(s, w):
			p.Update = append(p.Update, withContents(s, w))
		default:
			removing = append(removing, withContents(s, w))
		}
	}
	p.Update = append(p.Update, removing...)
	return p
}

// merge makes groups of one mapping one group, in the order they first appear.
func merge(groups []Group) []Group {
	var out []Group
	at := map[string]int{}
	for _, g := range groups {
		k := mappingKey(g.AddressType, g.Ports)
		if i, ok := at[k]; ok {
			out[i].Endpoints = append(out[i].Endpoints[:len(out[i].Endpoints):len(out[i].Endpoints)], g.Endpoints...)
			continue
		}
		at[k] = len(out)
		out = append(out, g)
	}
	return out
}

// fill adds endpoints from rest to w while it has room, and returns what is left.
func fill(w *discoveryv1.EndpointSlice, rest []discoveryv1.Endpoint, max int) []discoveryv1.Endpoint {
	n := min(max-len(w.Endpoints), len(rest))
	if n <= 0 {
		return rest
	}
	w.Endpoints = append(w.Endpoints, rest[:n]...)
	return rest[n:]
}

// withContents is cur with want's endpoints, ports and labels.
func withContents(cur, want *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	u := cur.DeepCopy()
	u.Endpoints, u.Ports, u.Labels = want.Endpoints, want.Ports, want.Labels
	return u
}

func sameContents(cur, want *discoveryv1.EndpointSlice) bool {
	return apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
		apiequality.Semantic.DeepEqual(cur.Labels, want.Labels)
}

// addsEndpoints says whether upd lists an endpoint cur does not.
func addsEndpoints(cur, upd *discoveryv1.EndpointSlice) bool {
	had := make(map[string]bool, len(cur.Endpoints))
	for _, e := range cur.Endpoints {
		had[endpointKey(e)] = true
	}
	for _, e := range upd.Endpoints {
		if !had[endpointKey(e)] {
			return true
		}
	}
	return false
}

// mappingKey names the slices an endpoint of a group may live in: one address type and one
// port mapping.
func mappingKey(t discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	return string(t) + "|" + portsKey(ports)
}

// endpointKey identifies an endpoint across syncs: its addresses (one pod, one address per
// family), as upstream's endpoint hash does.
func endpointKey(e discoveryv1.Endpoint) string { return strings.Join(e.Addresses, ",") }

package services

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/dataplane/programs"
)

// Contents prints every entry of the frontend, backend (both families), name and Maglev maps, one per line
// and sorted: the raw state the programs read, for comparing two syncs' results (tests, and
// an operator diffing nodes) without decoding it.
func (m Maps) Contents() (string, error) {
	var lines []string
	var errs []error
	dump := func(what string, mp *ebpf.Map, key, value any) {
		if mp == nil {
			return
		}
		it := mp.Iterate()
		for it.Next(key, value) {
			lines = append(lines, mapLine(what, reflect.ValueOf(key).Elem().Interface(), reflect.ValueOf(value).Elem().Interface()))
		}
		if err := it.Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s map: %w", what, err))
		}
	}
	dump("service", m.Services, &programs.SockSvcKey{}, &programs.SockSvcValue{})
	dump("backend", m.Backends, &programs.SockBackendKey{}, &programs.SockBackendValue{})
	dump("service6", m.Services6, &programs.SockSvc6Key{}, &programs.SockSvcValue{})
	dump("backend6", m.Backends6, &programs.SockBackendKey{}, &programs.SockBackend6Value{})
	dump("name", m.Names, new(uint32), &programs.SockSvcName{})
	dump("maglev", m.Maglev, &programs.SockMaglevKey{}, new(uint32))
	if len(errs) > 0 {
		return "", errs[0]
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// mapLine is one map entry as Contents prints it.
func mapLine(what string, key, value any) string {
	return fmt.Sprintf("%s %+v %+v", what, key, value)
}

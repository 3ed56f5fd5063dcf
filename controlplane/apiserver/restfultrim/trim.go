// Package restfultrim releases what go-restful keeps for every route but the API server never
// reads once it is built: the regular expression compiled from each route's path and the
// route's documentation (parameters, responses).
//
// go-restful compiles a regular expression for every route it builds, for its JSR-311 router
// and its OPTIONS and CORS filters. The generic API server routes with CurlyRouter, which
// matches the path's tokens, and uses neither filter, so ~3000 compiled expressions (9 MB of
// an idle server's 45 MB live heap, twice that in resident memory between collections) are
// never matched. The documentation is read only by the OpenAPI builders, which skiff runs once
// for the built-in groups before it calls Release. go-restful offers no way to drop either, so
// Release reaches the unexported fields by reflection; it checks each field's name and type
// first and changes nothing when go-restful's layout is not the one it knows (a dependency
// bump then fails TestReleaseKeepsRouting rather than corrupting a route).
package restfultrim

import (
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"unsafe"

	restful "github.com/emicklei/go-restful/v3"
)

// neverMatches stands in for a dropped expression, so that a caller this package does not
// know of (a CORS or OPTIONS filter added later) finds no route rather than a nil pointer.
var neverMatches = regexp.MustCompile(`^\x00never\x00$`)

// Stats says what Release dropped.
type Stats struct {
	Routes      int // routes whose expression and documentation were dropped
	Expressions int // distinct compiled expressions dropped
}

// Release drops the compiled path expressions and the documentation of every route of c's
// web services. c must route with CurlyRouter. Routes added later keep theirs.
func Release(c *restful.Container) (Stats, error) {
	var st Stats
	router, err := field(reflect.ValueOf(c).Elem(), "router", nil)
	if err != nil {
		return st, err
	}
	if router.IsNil() || router.Elem().Type() != reflect.TypeOf(restful.CurlyRouter{}) {
		return st, fmt.Errorf("go-restful container routes with %v, not CurlyRouter: its path expressions are in use", router.Elem().Type())
	}
	// Check every web service before changing any, so a layout this package does not know
	// leaves the container as it was.
	type target struct {
		lock   *sync.RWMutex
		routes *[]restful.Route
	}
	var targets []target
	for _, ws := range c.RegisteredWebServices() {
		v := reflect.ValueOf(ws).Elem()
		routes, err := field(v, "routes", reflect.TypeOf([]restful.Route(nil)))
		if err != nil {
			return st, err
		}
		lock, err := field(v, "routesLock", reflect.TypeOf(sync.RWMutex{}))
		if err != nil {
			return st, err
		}
		targets = append(targets, target{
			lock:   (*sync.RWMutex)(unsafe.Pointer(lock.UnsafeAddr())),
			routes: (*[]restful.Route)(unsafe.Pointer(routes.UnsafeAddr())),
		})
	}
	seen := map[**regexp.Regexp]bool{}
	for _, t := range targets {
		t.lock.Lock()
		for i := range *t.routes {
			r := &(*t.routes)[i]
			m, err := matcherOf(r)
			if err != nil {
				t.lock.Unlock()
				return st, err
			}
			if m != nil && *m != neverMatches {
				if !seen[m] {
					seen[m] = true
					st.Expressions++
				}
				*m = neverMatches
			}
			r.ParameterDocs = nil
			r.ResponseErrors = nil
			r.DefaultResponse = nil
			st.Routes++
		}
		t.lock.Unlock()
	}
	return st, nil
}

// matcherOf returns where route r keeps its compiled path expression (nil if it has none).
func matcherOf(r *restful.Route) (**regexp.Regexp, error) {
	expr, err := field(reflect.ValueOf(r).Elem(), "pathExpr", nil)
	if err != nil {
		return nil, err
	}
	if expr.Kind() != reflect.Pointer || expr.Type().Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("go-restful Route.pathExpr is a %v, not a pointer to a struct", expr.Type())
	}
	if expr.IsNil() {
		return nil, nil
	}
	m, err := field(expr.Elem(), "Matcher", reflect.TypeOf((*regexp.Regexp)(nil)))
	if err != nil {
		return nil, err
	}
	return (**regexp.Regexp)(unsafe.Pointer(m.UnsafeAddr())), nil
}

// field returns v's field name, addressable, checking its type when want is not nil.
func field(v reflect.Value, name string, want reflect.Type) (reflect.Value, error) {
	f := v.FieldByName(name)
	if !f.IsValid() {
		return f, fmt.Errorf("go-restful %v has no field %s", v.Type(), name)
	}
	if want != nil && f.Type() != want {
		return f, fmt.Errorf("go-restful %v.%s is a %v, not a %v", v.Type(), name, f.Type(), want)
	}
	return f, nil
}
